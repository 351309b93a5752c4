"""Generated protobuf and gRPC modules of the dyno.v1 API (see scripts/gen_protos.py). Do not edit."""
