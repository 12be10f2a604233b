"""A replica for the Ray test: the real server on the null engine (no model computes), served
as `geval-reward serve --host H --port P` would be, printing the same ready line."""

from __future__ import annotations

import argparse
import asyncio
import signal


async def serve(host: str, port: int) -> None:
    from geval_server import server as server_module
    from geval_server.config import ServeConfig
    from geval_server.engine.embedded_model import EMBEDDED_MODEL
    from geval_server.engine.null_engine import NullEngine
    from geval_server.scorers.registry import default_settings

    config = ServeConfig(model=EMBEDDED_MODEL, host=host, port=port, kinds=default_settings(leave_out=["semscore"]))
    judge = await server_module.start_judge(config, make_engine=NullEngine)
    server, _, bound = server_module.build_server(judge, config)
    await server.start()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    print(f"geval-reward: ready on {host}:{bound}", flush=True)
    await stop.wait()
    await server.stop(grace=0)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    arguments = parser.parse_args()
    asyncio.run(serve(arguments.host, arguments.port))
