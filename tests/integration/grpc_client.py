"""gRPC client helpers for the integration suite, built on Debian's
python3-grpcio (an independent HTTP/2 + gRPC implementation) and message
classes that protoc generates from proto/*.proto at session start."""
import subprocess
import sys
from pathlib import Path

import grpc

REPO_ROOT = Path(__file__).resolve().parents[2]
PROTO_DIR = REPO_ROOT / "proto"
SERVICE = "/inference.GRPCInferenceService/"
HEALTH = "/grpc.health.v1.Health/"
ROUTING = "/inferd.RoutingService/"
# Large tensors travel in both directions; grpcio's default limit is 4 MiB.
CHANNEL_OPTIONS = [("grpc.max_receive_message_length", 512 << 20),
                   ("grpc.max_send_message_length", 512 << 20)]


def generate(out_dir):
    """Runs protoc --python_out on proto/*.proto into out_dir and returns the
    (grpc_service_pb2, health_pb2) modules."""
    out_dir = Path(out_dir)
    protos = sorted(str(p) for p in PROTO_DIR.glob("*.proto"))
    subprocess.run(["protoc", "--python_out=%s" % out_dir, "-I", str(PROTO_DIR)] + protos,
                   check=True)
    if str(out_dir) not in sys.path:
        sys.path.insert(0, str(out_dir))
    import grpc_service_pb2
    import health_pb2
    return grpc_service_pb2, health_pb2


def generate_routing(out_dir):
    """generate() into out_dir, and the inferd_routing_pb2 module of inferd's
    own routing extension (proto/inferd_routing.proto, package inferd)."""
    generate(out_dir)
    import inferd_routing_pb2
    return inferd_routing_pb2


class Client:
    """Calls inferd's RPCs by path with the generated message classes."""

    def __init__(self, pb, hpb, target, credentials=None, options=None):
        self.pb, self.hpb = pb, hpb
        opts = CHANNEL_OPTIONS + list(options or [])
        if credentials is None:
            self.channel = grpc.insecure_channel(target, options=opts)
        else:
            self.channel = grpc.secure_channel(target, credentials, options=opts)
        # method -> (request class, response class)
        self.rpcs = {
            "ServerLive": (pb.ServerLiveRequest, pb.ServerLiveResponse),
            "ServerReady": (pb.ServerReadyRequest, pb.ServerReadyResponse),
            "ModelReady": (pb.ModelReadyRequest, pb.ModelReadyResponse),
            "ServerMetadata": (pb.ServerMetadataRequest, pb.ServerMetadataResponse),
            "ModelMetadata": (pb.ModelMetadataRequest, pb.ModelMetadataResponse),
            "ModelInfer": (pb.ModelInferRequest, pb.ModelInferResponse),
            "ModelConfig": (pb.ModelConfigRequest, pb.ModelConfigResponse),
            "ModelStatistics": (pb.ModelStatisticsRequest, pb.ModelStatisticsResponse),
            "RepositoryIndex": (pb.RepositoryIndexRequest, pb.RepositoryIndexResponse),
            "RepositoryModelLoad": (pb.RepositoryModelLoadRequest,
                                    pb.RepositoryModelLoadResponse),
            "RepositoryModelUnload": (pb.RepositoryModelUnloadRequest,
                                      pb.RepositoryModelUnloadResponse),
            "TraceSetting": (pb.TraceSettingRequest, pb.TraceSettingResponse),
            "LogSettings": (pb.LogSettingsRequest, pb.LogSettingsResponse),
            "SystemSharedMemoryStatus": (pb.SystemSharedMemoryStatusRequest,
                                         pb.SystemSharedMemoryStatusResponse),
            "SystemSharedMemoryRegister": (pb.SystemSharedMemoryRegisterRequest,
                                           pb.SystemSharedMemoryRegisterResponse),
            "SystemSharedMemoryUnregister": (pb.SystemSharedMemoryUnregisterRequest,
                                             pb.SystemSharedMemoryUnregisterResponse),
            "CudaSharedMemoryStatus": (pb.CudaSharedMemoryStatusRequest,
                                       pb.CudaSharedMemoryStatusResponse),
            "CudaSharedMemoryRegister": (pb.CudaSharedMemoryRegisterRequest,
                                         pb.CudaSharedMemoryRegisterResponse),
            "CudaSharedMemoryUnregister": (pb.CudaSharedMemoryUnregisterRequest,
                                           pb.CudaSharedMemoryUnregisterResponse),
        }

    def close(self):
        self.channel.close()

    def unary(self, method):
        req, resp = self.rpcs[method]
        return self.channel.unary_unary(SERVICE + method,
                                        request_serializer=req.SerializeToString,
                                        response_deserializer=resp.FromString)

    def call(self, method, timeout=30, **fields):
        """Builds the request from keyword fields and returns the response."""
        req, _ = self.rpcs[method]
        return self.unary(method)(req(**fields), timeout=timeout)

    def infer(self, request, timeout=30, **kw):
        return self.unary("ModelInfer")(request, timeout=timeout, **kw)

    def stream_infer(self):
        return self.channel.stream_stream(
            SERVICE + "ModelStreamInfer",
            request_serializer=self.pb.ModelInferRequest.SerializeToString,
            response_deserializer=self.pb.ModelStreamInferResponse.FromString)

    def routing(self, rpb, method, timeout=30, metadata=None, **fields):
        """inferd.RoutingService/<method> (ModelRoutingGet, ModelRoutingSet)
        with the messages of generate_routing(); returns the response."""
        call = self.channel.unary_unary(
            ROUTING + method, request_serializer=rpb.ModelRoutingRequest.SerializeToString,
            response_deserializer=rpb.ModelRoutingResponse.FromString)
        return call(rpb.ModelRoutingRequest(**fields), timeout=timeout, metadata=metadata)

    def raw(self, path):
        """A unary call that sends and returns bytes as they are."""
        return self.channel.unary_unary(path)

    def health_check(self, service="", timeout=30):
        call = self.channel.unary_unary(
            HEALTH + "Check", request_serializer=self.hpb.HealthCheckRequest.SerializeToString,
            response_deserializer=self.hpb.HealthCheckResponse.FromString)
        return call(self.hpb.HealthCheckRequest(service=service), timeout=timeout).status

    def health_watch(self, service="", timeout=60):
        call = self.channel.unary_stream(
            HEALTH + "Watch", request_serializer=self.hpb.HealthCheckRequest.SerializeToString,
            response_deserializer=self.hpb.HealthCheckResponse.FromString)
        return call(self.hpb.HealthCheckRequest(service=service), timeout=timeout)


def split_bytes(raw):
    """The elements of a raw BYTES tensor (4-byte little-endian length + bytes each)."""
    out, off = [], 0
    while off < len(raw):
        n = int.from_bytes(raw[off:off + 4], "little")
        out.append(raw[off + 4:off + 4 + n])
        off += 4 + n
    return out


def join_bytes(items):
    return b"".join(len(b).to_bytes(4, "little") + b for b in items)
