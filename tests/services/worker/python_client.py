#!/usr/bin/python3
"""An outside gRPC client of the worker: stubs generated from proto/ by
grpc_tools (Debian's python3-grpc-tools) at run time, then one streamed
generation, GetModelInfo, GetLoad and the standard health check.

    python_client.py PROTO_DIR ADDRESS PROMPT_IDS MAX_TOKENS  -> prints JSON
"""
import json
import os
import sys
import tempfile

import grpc
from grpc_tools import protoc


def main():
    proto_dir, address, prompt, max_tokens = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    out = tempfile.mkdtemp(prefix="ernie_stubs_")
    rc = protoc.main(["protoc", f"-I{proto_dir}", f"--python_out={out}", f"--grpc_python_out={out}",
                      os.path.join(proto_dir, "ernie/v1/worker.proto")])
    # health.proto is compiled from its own folder: a Python package named
    # "grpc" would shadow the grpc library itself. The wire names stay grpc.health.v1.
    health_dir = os.path.join(proto_dir, "grpc/health/v1")
    rc |= protoc.main(["protoc", f"-I{health_dir}", f"--python_out={out}", f"--grpc_python_out={out}",
                       os.path.join(health_dir, "health.proto")])
    if rc != 0:
        sys.exit(f"protoc failed: {rc}")
    sys.path.insert(0, out)
    from ernie.v1 import worker_pb2, worker_pb2_grpc  # noqa: E402

    channel = grpc.insecure_channel(address)
    stub = worker_pb2_grpc.WorkerStub(channel)
    info = stub.GetModelInfo(worker_pb2.GetModelInfoRequest(), timeout=10)
    request = worker_pb2.GenerateRequest(
        request_id="python-client",
        prompt_token_ids=[int(x) for x in prompt.split(",")],
        sampling=worker_pb2.SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True,
                                           logprobs=True, top_logprobs=2))
    tokens, logprobs, finish, messages = [], [], None, 0
    for response in stub.Generate(request, timeout=60):
        messages += 1
        tokens.extend(response.token_ids)
        logprobs.extend(lp.logprob for lp in response.logprobs)
        if response.finish_reason:
            finish = worker_pb2.FinishReason.Name(response.finish_reason)
    load = stub.GetLoad(worker_pb2.GetLoadRequest(), timeout=10)
    import health_pb2, health_pb2_grpc  # noqa: E402  (generated above)
    status = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""), timeout=10)
    health_rc = health_pb2.HealthCheckResponse.ServingStatus.Name(status.status)
    print(json.dumps({"architecture": info.architecture, "max_model_len": info.max_model_len, "tokens": tokens,
                      "logprobs": logprobs, "finish": finish, "messages": messages,
                      "running_after": load.running, "kv_used_after": load.kv_blocks_used, "health": health_rc}))


if __name__ == "__main__":
    main()
