"""Starts GuideLLM's OpenAI-compatible mock server with set latencies:
mock_llm.py PORT TTFT_MS ITL_MS OUTPUT_TOKENS."""
import sys

from guidellm.mock_server.server import MockServer
from guidellm.schemas.mock_server import MockServerConfig

port, ttft, itl, tokens = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
config = MockServerConfig(host="127.0.0.1", port=port, model="mock-llm", ttft_ms=ttft, itl_ms=itl, output_tokens=tokens)
MockServer(config).run(access_log=False)
