/* `tensorhost convert IN OUT`: reads any tensor the reader takes (FROSTT
 * .tns, .tns.gz, sptensor text, the binary format) and writes it as the
 * binary format (tensor_binary.h), or as FROSTT text when OUT ends in
 * ".tns" (gzip when in ".tns.gz"). A library function so that the program
 * (programs/tensorhost.c) stays a thin dispatcher. */
#ifndef TH_CONVERT_COMMAND_H
#define TH_CONVERT_COMMAND_H

#include <glib.h>

/* Runs the subcommand: argv[0] is "convert", the options and operands
 * follow. Prints a one-line summary on stdout (unless --quiet). Returns the
 * process exit status, as th_run_file does: 0 done; 1 an error (one
 * "tensorhost: error: ..." line on stderr, nothing written); 2 a malformed
 * command line; 130/143 stopped by SIGINT/SIGTERM (nothing written). */
int th_convert_main(int argc, char **argv);

/* Whether `path` names a text output (".tns" or ".tns.gz"); any other is
 * written in the binary format. */
gboolean th_convert_wants_text(const char *path);

#endif
