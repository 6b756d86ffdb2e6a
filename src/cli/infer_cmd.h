/*
 * infer_cmd: `inferd infer MODEL`, one inference request from the command
 * line (docs/cli.md).
 *
 *   inferd infer MODEL [--version V] [--input NAME=VALUE ...] [--json FILE]
 *                      [--output NAME ...] [--save DIR] [--json-output]
 *                      [--grpc [--grpc-port N]] [--binary] [common options]
 *
 * Inputs: --json FILE (a KServe v2 request body: its inputs, outputs, id
 * and parameters), and --input NAME=VALUE, VALUE one of: FILE.npy (NumPy,
 * cli/npy.h), @FILE (the file's bytes as one BYTES element: a picture for a
 * preprocessed model), or JSON text (nested arrays or a scalar, of the
 * datatype the model's metadata gives the input; an object
 * {"datatype","shape","data"} states them itself). Sent over REST (JSON,
 * or Triton's binary tensor extension with --binary or when a tensor
 * cannot travel as JSON: FP16, BF16, bytes that are not UTF-8) or gRPC
 * (--grpc: KServe v2 ModelInfer, cli/grpc_client.h). Outputs: printed as a
 * table, or as one KServe v2 JSON response with --json-output; --save DIR
 * writes DIR/NAME.npy per output.
 *
 * Exit status: cli/client.h's codes (0, 1 the server refused, 2 usage or an
 * unreadable input, 3 cannot connect).
 */
#ifndef INFERD_CLI_INFER_CMD_H
#define INFERD_CLI_INFER_CMD_H

/* argv[0] is "infer". Returns the exit status. */
int infer_main(int argc, char **argv);

#endif
