/* Hostile names for the escaping tests (Scripts/make-hostile-fixtures): a function whose symbol holds
   ESC (a "clear screen" sequence), a newline that would forge an event line, a C1 control (U+009B,
   CSI) and a backslash. */
int hostile_function(int x) __asm__("evil\x1b[2J\nRemoved: 0xdead (0x1) FORGED\xc2\x9b\\name");
int hostile_function(int x) { return x * 7; }
