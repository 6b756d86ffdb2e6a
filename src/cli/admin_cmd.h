/*
 * admin_cmd: `inferd models list|load|unload|stats` and `inferd health`,
 * clients of a running server's repository, statistics and health APIs
 * (docs/cli.md).
 *
 *   inferd models list [--ready]            POST /v2/repository/index
 *   inferd models load NAME                 POST /v2/repository/models/NAME/load
 *   inferd models unload NAME               POST /v2/repository/models/NAME/unload
 *   inferd models stats [NAME [--version V]] GET /v2/models[/NAME[/versions/V]]/stats
 *   inferd health [--model NAME [--version V]]
 *                 GET /v2/health/live, /v2/health/ready, /v2/models/NAME/ready
 *
 * Answers are printed as tables, or as the server's JSON with
 * --json-output. A load waits as long as the server takes (--timeout,
 * default 600 s for loads) and shows a progress line on stderr when it is a
 * terminal. Exit status: cli/client.h's codes; health exits 4 when the
 * server (or the model) is not live or not ready.
 */
#ifndef INFERD_CLI_ADMIN_CMD_H
#define INFERD_CLI_ADMIN_CMD_H

/* argv[0] is "models". Returns the exit status. */
int models_main(int argc, char **argv);
/* argv[0] is "health". Returns the exit status. */
int health_main(int argc, char **argv);

#endif
