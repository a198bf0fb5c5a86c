// The transports behind client::Connect (internal to the client library).
#pragma once

#include <memory>
#include <string>

#include "client/client.h"

namespace inferd::client {

// "http://host:port/" -> "host:port"
std::string HostPort(const std::string& url);

std::unique_ptr<Client> MakeGrpcClient(const ClientOptions& options);
StatusOr<std::unique_ptr<Client>> MakeHttpClient(const ClientOptions& options);

}  // namespace inferd::client
