"""A client that knows nothing of agentic but its address: it discovers the API with the
official Python reflection client (grpcio-reflection, which speaks reflection v1alpha), builds
the messages from the descriptors the server sends, and runs a prompt to its end.

Usage: reflection_client.py HOST:PORT USER INPUT. Prints one JSON object: the services listed,
the kinds of the stream's events, and the prompt as GetPrompt answers it.
"""

import json
import sys

import grpc
from google.protobuf import descriptor_pool, json_format, message_factory
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

SERVICE = "agentic.v1.PromptGateway"


def main() -> None:
    address, user, text = sys.argv[1:4]
    channel = grpc.insecure_channel(address)
    database = ProtoReflectionDescriptorDatabase(channel)
    services = list(database.get_services())
    pool = descriptor_pool.DescriptorPool(database)
    service = pool.FindServiceByName(SERVICE)
    metadata = [("x-user-id", user)]

    def method(name):
        found = service.FindMethodByName(name)
        request = message_factory.GetMessageClass(found.input_type)
        response = message_factory.GetMessageClass(found.output_type)
        path = f"/{SERVICE}/{name}"
        call = (channel.unary_stream if found.server_streaming else channel.unary_unary)(
            path,
            request_serializer=request.SerializeToString,
            response_deserializer=response.FromString,
        )
        return lambda fields: call(json_format.ParseDict(fields, request()), metadata=metadata, timeout=60)

    created = method("CreatePrompt")({"input": text})
    kinds = []
    for event in method("StreamPrompt")({"promptId": created.id}):
        kinds.append(event.WhichOneof("kind"))
    prompt = method("GetPrompt")({"promptId": created.id})
    print(
        json.dumps(
            {
                "services": services,
                "events": kinds,
                "prompt": json_format.MessageToDict(prompt),
            }
        )
    )


if __name__ == "__main__":
    main()
