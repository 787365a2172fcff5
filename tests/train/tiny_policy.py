"""A tiny causal LM made here (random weights, a byte-level BPE tokenizer trained on a few
strings; nothing downloaded) and a small OpenAI-compatible server for it on 127.0.0.1 that
returns token ids and log-probabilities the way vLLM does (`return_token_ids`,
`logprobs`), only when asked. It records every generation, so a test can check that the
tokens a trainer got are the ones the server produced."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}")
SPECIAL = ["<pad>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>", "<|tool|>"]
CORPUS = ["hello world", "say hello", "the capital of France is Paris", "red green blue",
          "You are a capable assistant. Answer the user's request.", "answer: 42"]


def tiny_tokenizer() -> Any:
    """A byte-level BPE tokenizer trained on `CORPUS`, with a chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS * 4, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<|end|>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


def tiny_model(vocab_size: int, seed: int = 0) -> Any:
    """A 2-layer Llama with a 32-wide hidden state and random weights (no dropout)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=vocab_size, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                         max_position_embeddings=1024, pad_token_id=0, eos_token_id=1,
                         bos_token_id=1, tie_word_embeddings=False)
    return LlamaForCausalLM(config)


@dataclass
class Generation:
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]


@dataclass
class PolicyServer:
    """Serves `model` (set it to the trainer's model: generation then follows training)."""

    tokenizer: Any
    model: Any = None
    max_tokens: int = 8
    generations: list[Generation] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._send({"object": "list", "data": [{"id": "tiny", "object": "model"}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                self._send(server.complete(body))

            def _send(self, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> PolicyServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def generate(self, prompt_ids: list[int], max_tokens: int,
                 temperature: float) -> Generation:
        import torch

        eos = self.tokenizer.eos_token_id
        ids = torch.tensor([prompt_ids])
        completion: list[int] = []
        logprobs: list[float] = []
        with torch.no_grad():
            for _ in range(max_tokens):
                logits = self.model(input_ids=ids).logits[0, -1].float()
                logp = torch.log_softmax(logits / max(temperature, 1e-5), dim=-1)
                token = int(torch.multinomial(logp.exp(), 1).item())
                completion.append(token)
                logprobs.append(float(logp[token]))
                ids = torch.cat([ids, torch.tensor([[token]])], dim=1)
                if token == eos:
                    break
        return Generation(list(prompt_ids), completion, logprobs)

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        """One chat completion, in vLLM's response layout."""
        with self._lock:  # one generation at a time: the model is shared with the trainer
            self.requests.append(body)
            prompt_ids = self.tokenizer.apply_chat_template(
                body["messages"], add_generation_prompt=True, tokenize=True,
                return_dict=False)
            gen = self.generate(list(prompt_ids), int(body.get("max_tokens") or self.max_tokens),
                                float(body.get("temperature") or 1.0))
            self.generations.append(gen)
        text = self.tokenizer.decode(gen.completion_ids, skip_special_tokens=True)
        choice: dict[str, Any] = {
            "index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": text}}
        response: dict[str, Any] = {
            "id": f"cmpl-{len(self.generations)}", "object": "chat.completion",
            "created": int(time.time()), "model": body.get("model", "tiny"),
            "usage": {"prompt_tokens": len(gen.prompt_ids),
                      "completion_tokens": len(gen.completion_ids),
                      "total_tokens": len(gen.prompt_ids) + len(gen.completion_ids)}}
        if body.get("logprobs"):
            choice["logprobs"] = {"content": [
                {"token": f"token_id:{t}", "logprob": lp, "top_logprobs": []}
                for t, lp in zip(gen.completion_ids, gen.logprobs, strict=True)]}
        if body.get("return_token_ids"):
            choice["token_ids"] = gen.completion_ids
            response["prompt_token_ids"] = gen.prompt_ids
        response["choices"] = [choice]
        return response
