// The one place where a Status code becomes a gRPC status code.
#pragma once

#include <grpcpp/support/status.h>

#include "common/status.h"

namespace inferd {

inline grpc::StatusCode GrpcCodeFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return grpc::StatusCode::OK;
    case StatusCode::kInvalidArgument:
      return grpc::StatusCode::INVALID_ARGUMENT;
    case StatusCode::kFailedPrecondition:
      return grpc::StatusCode::FAILED_PRECONDITION;
    case StatusCode::kNotFound:
      return grpc::StatusCode::NOT_FOUND;
    case StatusCode::kAlreadyExists:
      return grpc::StatusCode::ALREADY_EXISTS;
    case StatusCode::kResourceExhausted:
      return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case StatusCode::kUnavailable:
      return grpc::StatusCode::UNAVAILABLE;
    case StatusCode::kDeadlineExceeded:
      return grpc::StatusCode::DEADLINE_EXCEEDED;
    case StatusCode::kCancelled:
      return grpc::StatusCode::UNAVAILABLE;  // cancelled by the server (shutdown): retry elsewhere
    case StatusCode::kUnimplemented:
      return grpc::StatusCode::UNIMPLEMENTED;
    case StatusCode::kInternal:
      return grpc::StatusCode::INTERNAL;
  }
  return grpc::StatusCode::INTERNAL;
}

inline grpc::Status ToGrpcStatus(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(GrpcCodeFor(status.code()), status.message());
}

}  // namespace inferd
