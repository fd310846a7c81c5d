"""``kittiwake auth login`` through a plugin's login methods (its ``auth`` hook), over the
provider login routes of the runtime (in this process, or the server holding the data
dir)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TextIO

from gateway.cli._setup import SetupError, read_key
from gateway.cli._terminal import check
from runtime import llm as llm_package

if TYPE_CHECKING:
    import httpx

__all__ = ["plugin_login"]


async def plugin_login(
    api: httpx.AsyncClient, directory: str, provider_id: str, store: llm_package.CredentialStore,
    *, stdin: TextIO, err: TextIO,
) -> bool:  # fmt: skip
    """Log in to *provider_id* with a method the plugins of the Location *directory* offer
    (``GET /provider/auth``); False when they offer none. The method (when there are
    several) and its prompts are asked on *err* and read from *stdin*, a line each. An
    ``api`` method's key is stored in *store* with the answers as its metadata; an
    ``oauth`` one is started and finished over the routes (the server stores it).

    Raises:
        SetupError: an answer that is no choice, or an empty key or code.
        RunFailed: a route refused (its ``_tag`` and message).
    """
    where = {"directory": directory}
    offered: dict[str, list[dict[str, Any]]] = check(await api.get("/provider/auth", params=where))
    methods = offered.get(provider_id) or []
    if not methods:
        return False
    index = 0
    if len(methods) > 1:
        labels = [m["label"] for m in methods]
        index = _choose(f"login method for {provider_id}", labels, labels, stdin, err)
    method = methods[index]
    inputs = _answers(method.get("prompts") or [], stdin, err)
    if method["type"] == "api":
        key = read_key(provider_id, stdin)
        store.set(provider_id, llm_package.ApiKeyCredential(key=key, metadata=inputs))
        return True
    body = {"method": index, "inputs": inputs}
    path = f"/provider/{provider_id}/oauth"
    started = check(await api.post(f"{path}/authorize", params=where, json=body))
    err.write(f"kittiwake: open {started['url']}\n")
    if started["instructions"]:
        err.write(f"kittiwake: {started['instructions']}\n")
    finish: dict[str, Any] = {"method": index}
    if started["method"] == "code":
        finish["code"] = _line("the code", stdin, err)
    err.flush()
    check(await api.post(f"{path}/callback", params=where, json=finish))
    return True


def _answers(prompts: list[dict[str, Any]], stdin: TextIO, err: TextIO) -> dict[str, str]:
    """Each prompt that applies asked in order (``when`` looks at the answers so far)."""
    answers: dict[str, str] = {}
    for prompt in prompts:
        when = prompt.get("when")
        if when is not None:
            equal = answers.get(when["key"]) == when["value"]
            if equal != (when["op"] == "eq"):
                continue
        if prompt["type"] == "select":
            options = prompt["options"]
            labels = [o["label"] + (f" ({o['hint']})" if o.get("hint") else "") for o in options]
            values = [o["value"] for o in options]
            answers[prompt["key"]] = values[_choose(prompt["message"], labels, values, stdin, err)]
        else:
            hint = f" [{prompt['placeholder']}]" if prompt.get("placeholder") else ""
            answers[prompt["key"]] = _line(prompt["message"] + hint, stdin, err)
    return answers


def _choose(question: str, labels: list[str], values: list[str], stdin: TextIO, err: TextIO) -> int:
    """The index of the choice read: its number (from 1) or its value."""
    err.write(f"kittiwake: {question}:\n")
    for n, label in enumerate(labels, 1):
        err.write(f"  {n}. {label}\n")
    answer = _line("choose", stdin, err)
    if answer.isdigit() and 1 <= int(answer) <= len(labels):
        return int(answer) - 1
    if answer in values:
        return values.index(answer)
    raise SetupError(f"{answer!r} is none of the choices for {question}")


def _line(question: str, stdin: TextIO, err: TextIO) -> str:
    err.write(f"{question}: ")
    err.flush()
    answer = stdin.readline().strip()
    if not answer:
        raise SetupError(f"no answer given for {question}")
    return answer
