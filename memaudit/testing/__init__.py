"""The mock model, a first-class part of the library (like inspect_ai's mock provider): a scripted
OpenAI-compatible httpx transport (`FakeOpenAI`) and the same answers on a real loopback HTTP
server (`serve`), plus builders of synthetic releases and score rows. Tests and the performance
scripts under perf/ use them; `make run` never does."""
from memaudit.testing.fake_openai import FakeOpenAI, completion
from memaudit.testing.http_server import serve

__all__ = ["FakeOpenAI", "completion", "serve"]
