/*
 * cli_commands.h — the subcommands of the detinfer tool (tools/detinfer.c
 * dispatches on argv[1]; argv[0] of each is the subcommand's name).
 */
#ifndef CLI_COMMANDS_H
#define CLI_COMMANDS_H

int cli_cmd_run(int argc, char **argv);
int cli_cmd_verify(int argc, char **argv);
int cli_cmd_verify_url(int argc, char **argv);   /* verify --url: a live server */
int cli_cmd_verify_child(int argc, char **argv); /* hidden: the fresh-process axis */
int cli_cmd_doctor(int argc, char **argv);
int cli_cmd_bench(int argc, char **argv);
int cli_cmd_serve(int argc, char **argv); /* tools/serve/ */
int cli_cmd_replay(int argc, char **argv); /* a served answer from its receipt */

#endif /* CLI_COMMANDS_H */
