/* `tensorhost predict --model DIR --indices FILE [--output OUT]`: the
 * values the CP model a run saved in DIR (model_reader.h) gives to the
 * entries listed in FILE (cp_predict.h), what a completed tensor is for.
 * A library function so that the program (programs/tensorhost.c) stays a
 * thin dispatcher. */
#ifndef TH_PREDICT_COMMAND_H
#define TH_PREDICT_COMMAND_H

/* Runs the subcommand: argv[0] is "predict", the options follow. Writes
 * the predictions as FROSTT text to OUT (atomically) or to standard
 * output, and one line on stderr with their RMSE against FILE's values
 * (unless --quiet). Returns the process exit status, as th_run_file does:
 * 0 done; 1 an error (one "tensorhost: error: ..." line on stderr, OUT
 * not written); 2 a malformed command line; 130/143 stopped by
 * SIGINT/SIGTERM. */
int th_predict_main(int argc, char **argv);

#endif
