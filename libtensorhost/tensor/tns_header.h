/* The tensorhost header of a FROSTT .tns file: comment lines that carry what
 * the nonzero lines cannot (the dims, when a mode's last indices hold no
 * nonzero; the label that marks a file as synthetic), so that a text file
 * keeps what a binary one (tensor_binary.h) keeps. Every FROSTT reader skips
 * "#" lines, so a file with the header is still plain FROSTT to them.
 * tensor_writer.c writes the header, tensor_reader.c reads it;
 * docs/tensor-format.md describes it for users:
 *
 *   # tensorhost header: 1.0
 *   # tensorhost dims: 165427 24 874 1247
 *   # tensorhost label: synthetic tensor: tensorhost-synth dims=...
 *
 * A header line is a whole line "# tensorhost KEY: VALUE" (KEY of a-z, 0-9
 * and "_"), before the first nonzero line (and before an sptensor header).
 * "header: MAJOR.MINOR" comes first; each key at most once. A reader
 * refuses a major version it does not know; minor versions only add keys,
 * so a key unknown to the reader is skipped when the file's minor version
 * is later than the reader's, and is an error otherwise (a typo). In 1.0:
 *   dims   one size per mode, 1 to 2^32 - 1: the tensor's dims, which the
 *          nonzero lines must fit (and match in number);
 *   label  free text (UTF-8, at most TH_TNS_MAX_LABEL_BYTES once decoded)
 *          with backslash escapes: \\ \n \r \t and \xHH (any byte but 00);
 *          blanks around it are not part of it (write \x20 to keep one). */
#ifndef TH_TNS_HEADER_H
#define TH_TNS_HEADER_H

#include <glib.h>

#include "tensor/sptensor.h"

#define TH_TNS_HEADER_PREFIX "# tensorhost "
#define TH_TNS_HEADER_MAJOR 1u
#define TH_TNS_HEADER_MINOR 0u
/* A label's longest length, in bytes: the binary format's note's, so that
 * a label read from text always fits a binary file. */
#define TH_TNS_MAX_LABEL_BYTES 65536u

/* The header's lines for `t` ("# tensorhost header: 1.0\n", dims, and the
 * label when t has one), each ending in "\n". NULL with `*problem` set
 * (g_free both) when the label is longer than TH_TNS_MAX_LABEL_BYTES. */
char *th_tns_header_text(const th_sptensor *t, char **problem);

/* `label` escaped for a label line: backslashes, control characters and
 * blanks at either end written as escapes, everything else as it is. */
char *th_tns_label_escape(const char *label);

/* Decodes the escapes of [text, text + length). NULL with `*problem` set
 * (g_free it) for an unknown escape, an escaped NUL byte, text that is not
 * UTF-8 once decoded, or a label longer than TH_TNS_MAX_LABEL_BYTES. */
char *th_tns_label_unescape(const char *text, size_t length, char **problem);

#endif
