"""LangChain's `bind_tools` (langchain-openai's ChatOpenAI) against the
server, on the real Gemma 3 270M with --chat-template chatml: the tool calls
come back parsed, their arguments validate against the tool's schema
(jsonschema), the same request gives the same calls (ids included), and a
stream aggregates to the same calls. Skipped when langchain-openai is not
installed (it is not in tests/requirements.txt: `pip install
langchain-openai`)."""
import pytest
from conftest import SLOW, serve_real

jsonschema = pytest.importorskip("jsonschema")
langchain_openai = pytest.importorskip("langchain_openai")

WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                            "days": {"type": "integer", "minimum": 1, "maximum": 7}},
           "required": ["city", "days"], "additionalProperties": False}
TOOL = {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                         "parameters": WEATHER}}
ASK = "What is the weather in Paris for the next 3 days?"


@pytest.fixture
def chatml(serve):
    return serve_real(serve, "--chat-template", "chatml", "--context", "1024", "--max-sequences", "2")


def chat(server):
    return langchain_openai.ChatOpenAI(base_url=server.url + "/v1", api_key="none", model="verify",
                                       temperature=0, max_tokens=64, max_retries=0, timeout=300 * SLOW)


def test_bind_tools_round_trip(chatml):
    bound = chat(chatml).bind_tools([TOOL], tool_choice="get_weather", parallel_tool_calls=False)
    first = bound.invoke(ASK)
    assert first.tool_calls, first
    for call in first.tool_calls:
        assert call["name"] == "get_weather"
        jsonschema.validate(call["args"], WEATHER)
        assert call["id"]
    again = bound.invoke(ASK)
    assert again.tool_calls == first.tool_calls  # the same calls, ids included
    # negative control: another question gives other arguments, so equality above means something
    other = bound.invoke("What is the weather in Tokyo for the next 7 days?")
    assert other.tool_calls != first.tool_calls

    chunks = list(bound.stream(ASK))
    total = chunks[0]
    for c in chunks[1:]:
        total = total + c
    assert total.tool_calls == first.tool_calls
