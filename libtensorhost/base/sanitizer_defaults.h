/* The sanitizer runtime's defaults for programs that load plugins, in
 * AddressSanitizer builds (sanitizer_defaults.c says which and why). */
#ifndef TH_SANITIZER_DEFAULTS_H
#define TH_SANITIZER_DEFAULTS_H

/* Does nothing at run time: the defaults are hooks the sanitizer runtime
 * looks up when the program starts. A static library's object is linked only
 * when something refers to it, and the runtime's own weak hooks never do, so
 * the plugin loader calls this to bring the hooks into every program that
 * loads plugins. */
void th_sanitizer_defaults_link(void);

#endif
