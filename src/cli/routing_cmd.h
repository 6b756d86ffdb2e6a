/*
 * routing_cmd: `inferd routing get|set MODEL`, a client of a running
 * server's routing API (GET/PUT /v2/models/{m}/routing, docs/traffic.md).
 *
 *   inferd routing get MODEL [--url URL]
 *   inferd routing set MODEL (--file F | --json TEXT | - | --canary S:V:W) [--url URL]
 *
 * The URL is --url, else $INFERD_URL, else http://127.0.0.1:8000. A table
 * is printed as the server returned it (one line of JSON). Exit status: 0,
 * 1 when the request failed (the server's error message on stderr), 2 for
 * a usage error.
 *
 * --canary STABLE:VERSION:WEIGHT reads the current table, changes only its
 * canary (keeping its guard, if any) and writes it back with the
 * generation it read, so that a change made in between is refused (409)
 * rather than overwritten.
 */
#ifndef INFERD_CLI_ROUTING_CMD_H
#define INFERD_CLI_ROUTING_CMD_H

/* argv[0] is "routing". Returns the exit status. */
int routing_main(int argc, char **argv);

#endif
