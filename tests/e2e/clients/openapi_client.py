"""Drives agentic through a client openapi-python-client generated from its OpenAPI document
(nothing here knows agentic's API but what that client was made from): creates a prompt,
follows its event stream to the approval it waits for, approves the call, follows the stream
to the end, and reads the prompt back.

Usage: openapi_client.py PACKAGE_PARENT BASE_URL TOKEN. Prints one JSON object.
"""

import json
import sys


def events(client, prompt_id, after):
    """The stream's events after `after` (each `data`, as JSON), read to its `end` event."""
    seen, kind = [], None
    url = f"/v1/prompts/{prompt_id}/events"
    with client.get_httpx_client().stream("GET", url, params={"after": after}) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if line.startswith("event:"):
                kind = line.split(":", 1)[1].strip()
            elif line.startswith("data:") and kind == "end":
                return seen
            elif line.startswith("data:"):
                seen.append(json.loads(line.split(":", 1)[1]))
            elif line == "":
                kind = None
    return seen


def kinds(seen):
    return [next(key for key in event if key not in ("sequence", "promptId", "at")) for event in seen]


def main() -> None:
    parent, base_url, token = sys.argv[1:4]
    sys.path.insert(0, parent)
    from agentic_client import AuthenticatedClient
    from agentic_client.api.prompts import approve_tool_call, create_prompt, get_prompt
    from agentic_client.models import ApproveToolCallRequest, CreatePromptRequest, Prompt, PromptState

    client = AuthenticatedClient(base_url=base_url, token=token)
    created = create_prompt.sync(client=client, body=CreatePromptRequest(input_="launch it"))
    assert isinstance(created, Prompt), created
    first = events(client, created.id, 0)
    waiting = get_prompt.sync(created.id, client=client)
    call = next(output.tool for output in waiting.output if output.tool)
    approved = approve_tool_call.sync(
        created.id, call.id, client=client, body=ApproveToolCallRequest()
    )
    assert isinstance(approved, Prompt), approved
    rest = events(client, created.id, int(first[-1]["sequence"]))
    done = get_prompt.sync(created.id, client=client)
    print(
        json.dumps(
            {
                "types": [type(value).__name__ for value in (created, waiting, approved, done)],
                "state_type": type(done.state).__name__,
                "state": done.state.value,
                "waiting_state": waiting.state.value,
                "call": call.function,
                "first": kinds(first),
                "rest": kinds(rest),
                "texts": [output.text.content for output in done.output if output.text],
            }
        )
    )


if __name__ == "__main__":
    main()
