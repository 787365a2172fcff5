"""A minimal agent endpoint implementing benchflow's hosted-benchmark contract.

Run it:

    pip install starlette uvicorn
    python examples/http-agent/app.py --port 8765 --token secret-token

then point benchflow at it:

    benchflow run tasks/hello-world -a http --agent-endpoint http://127.0.0.1:8765/eval \
        --header 'Authorization: Bearer secret-token'

The agent is a fixed rule: it answers the instruction's first line, reversed
(a stand-in for your model call), and scores itself 1.0 when the instruction is
not empty. It reuses `attempt.traceId` as its own trace id (see the log line),
which is how an agent's traces join benchflow's.

For tests, query parameters change how it answers: `score=number|object|passed|none`
(the form of the score), `status=<code>` (answer that HTTP status),
`flaky=<n>` (answer 503 to the first n requests with one trace id), `sleep=<seconds>`,
`body=garbage` (a non-JSON body), `echo_auth=1` (the output quotes the Authorization
header: benchflow must scrub it). `GET /received` lists the payloads received.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections import Counter
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

log = logging.getLogger("http-agent")


def solve(instruction: str) -> str:
    """The agent: a fixed rule (replace with your model call)."""
    first = instruction.strip().splitlines()[0] if instruction.strip() else ""
    return first[::-1]


def create_app(token: str | None = None) -> Starlette:
    """The endpoint; with `token`, requests must carry `Authorization: Bearer <token>`."""
    received: list[dict[str, Any]] = []
    attempts: Counter[str] = Counter()

    async def evaluate(request: Request) -> Response:
        auth = request.headers.get("authorization")
        if token is not None and auth != f"Bearer {token}":
            return JSONResponse({"detail": "unauthorized"}, status_code=401)
        payload = await request.json()
        received.append(payload)
        q = request.query_params
        attempt = payload.get("attempt", {})
        attempts[attempt.get("traceId", "")] += 1
        log.info("attempt %s trace %s", attempt.get("id"), attempt.get("traceId"))
        if "sleep" in q:
            await asyncio.sleep(float(q["sleep"]))
        if attempts[attempt.get("traceId", "")] <= int(q.get("flaky", 0)):
            return PlainTextResponse("busy, try again", status_code=503)
        if "status" in q:
            return PlainTextResponse(f"failing on purpose (auth was {auth})",
                                     status_code=int(q["status"]))
        if q.get("body") == "garbage":
            return PlainTextResponse("<html>not json</html>")
        output = solve(str(payload.get("task", {}).get("instruction") or ""))
        if q.get("echo_auth"):
            output = f"{output} (auth: {auth})"
        score = 1.0 if output else 0.0
        form = q.get("score", "object")
        answer: dict[str, Any] = {"output": output}
        if form == "number":
            answer["score"] = score
        elif form == "object":
            answer["score"] = {"score": score}
            answer["passed"] = score >= 0.8
        elif form == "passed":
            answer["passed"] = score >= 0.8
        return JSONResponse(answer)

    async def list_received(request: Request) -> Response:
        return JSONResponse(received)

    return Starlette(routes=[Route("/eval", evaluate, methods=["POST"]),
                             Route("/received", list_received, methods=["GET"])])


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--token", default=None, help="require 'Authorization: Bearer TOKEN'")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO)
    uvicorn.run(create_app(args.token), host=args.host, port=args.port)


if __name__ == "__main__":
    main()
