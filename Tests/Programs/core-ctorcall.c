/* Its constructor calls back into the test (through libcore_ctorhook.so) while dlopen holds the
 * loader's lock: registering observers or refreshing there must not call any handler. */
void core_call_hook(void);

__attribute__((constructor)) static void core_ctorcall_init(void) { core_call_hook(); }
