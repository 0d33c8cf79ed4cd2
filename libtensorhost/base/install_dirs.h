/* The installation's folders, found from where the library's code runs, so
 * that the build tree (which mirrors the install tree) and any copy of the
 * install tree find their own plugins and MPI shims without configuration. */
#ifndef TH_INSTALL_DIRS_H
#define TH_INSTALL_DIRS_H

/* The folder `below_libdir` (e.g. "tensorhost/plugins") of the installation
 * this code belongs to: in libtensorhost (a shared object in
 * <prefix>/<libdir>), <libdir>/below_libdir; in a program (<prefix>/bin),
 * <bindir>/../`below_prefix` (e.g. TH_PLUGIN_RELDIR). NULL when neither
 * can be told. g_free. */
char *th_installed_dir(const char *below_libdir, const char *below_prefix);

#endif
