/* A shared object with a PT_INTERP and no DF_1_PIE (as PAM's pam_cap.so and glibc's libc.so.6, which
   can also be run): readelf and file(1) call it a shared object, not a PIE. */
const char fixture_interp[] __attribute__((section(".interp"), used)) = "/lib/ld-fixture.so.1";

int fixture_interp_version(void) { return 1; }
