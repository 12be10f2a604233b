"""The `geval-reward` command (cli.py), and the verifiers judge plugin of id `geval-reward`.

verifiers resolves a judge plugin's id to the package of that name (`geval-reward` ->
`geval_reward`) and takes the one Judge subclass in its `__all__`. The judge's code is
geval_client/trainers/verifiers.py, which needs verifiers: it is imported only when
verifiers asks for the name, so the command still depends on neither side."""

__all__ = ["GEvalJudge", "GEvalJudgeConfig"]


def __getattr__(name: str):
    if name in __all__:
        from geval_client.trainers import verifiers

        return getattr(verifiers, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
