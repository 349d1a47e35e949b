// Linked into the test binaries that start gRPC servers and channels in
// process. Where gRPC's I/O does not run in the background (this machine's
// kind), every callback-API channel and server shares one "alternative"
// completion queue with threads of its own, counted by its users: when a
// test drops the last of them the queue is shut down, and the next test's
// first user starts another. A thread of the old queue can then still unref
// it and abort the process (gRPC 1.51: "grpc_cq_internal_unref ...
// assertion failed: prior > 0"; the gateway tests hit it about once in 20
// runs of the whole suite on a loaded machine, and once in CI). A channel
// that has made one callback call and is never destroyed holds that queue
// for the process's life, so it is never shut down between tests. The
// servers themselves keep their channels for as long as they run, so they
// never meet this.
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>

namespace {

class GrpcCallbackQueueKeptUp : public ::testing::Environment {
 public:
  void SetUp() override {
    // Nothing listens on port 1: the call fails at once, and the channel
    // keeps its reference to the callback queue.
    static auto* const channel = new std::shared_ptr<grpc::Channel>(
        grpc::CreateChannel("127.0.0.1:1", grpc::InsecureChannelCredentials()));
    grpc::GenericStub stub(*channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc::Slice empty("");  // an empty message (a default ByteBuffer is no message at all)
    grpc::ByteBuffer request(&empty, 1), response;
    std::promise<void> done;
    stub.UnaryCall(&context, "/ernie.test.KeepAlive/Call", grpc::StubOptions(), &request, &response,
                   [&done](const grpc::Status&) { done.set_value(); });
    done.get_future().wait();
  }
};

[[maybe_unused]] ::testing::Environment* const kKeptUp =
    ::testing::AddGlobalTestEnvironment(new GrpcCallbackQueueKeptUp);

}  // namespace
