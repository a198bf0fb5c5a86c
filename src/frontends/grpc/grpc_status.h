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

// The inverse, for the client: a server's gRPC status as the Status it meant.
inline Status FromGrpcStatus(const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::OK:
      return Status::Ok();
    case grpc::StatusCode::INVALID_ARGUMENT:
      return Status::InvalidArgument(status.error_message());
    case grpc::StatusCode::FAILED_PRECONDITION:
      return Status::FailedPrecondition(status.error_message());
    case grpc::StatusCode::NOT_FOUND:
      return Status::NotFound(status.error_message());
    case grpc::StatusCode::ALREADY_EXISTS:
      return Status::AlreadyExists(status.error_message());
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return Status::ResourceExhausted(status.error_message());
    case grpc::StatusCode::UNAVAILABLE:
      return Status::Unavailable(status.error_message());
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return Status::DeadlineExceeded(status.error_message());
    case grpc::StatusCode::CANCELLED:
      return Status::Cancelled(status.error_message());
    case grpc::StatusCode::UNIMPLEMENTED:
      return Status::Unimplemented(status.error_message());
    default:
      return Status::Internal(status.error_message());
  }
}

}  // namespace inferd
