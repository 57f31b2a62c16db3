"""review29: a rename-only console edit must not rewrite the other single-line fields. A
source stored with a line break (the API takes one) is rendered into <input type=text>, whose
value a browser sends with its line breaks stripped (HTML: "strip newlines"), while the hidden
orig_source keeps them (sent as CRLF): the form saw a change and wrote the stripped source."""

from __future__ import annotations

import html
import re

import httpx

from tests.conftest import Key
from tests.console.conftest import sign_in


async def test_a_rename_only_edit_leaves_a_multiline_source_as_stored(
    client: httpx.AsyncClient, key: Key
) -> None:
    source = "ci run 4411\nstep: deploy"
    made = await client.post("/v1/remember", json={
        "namespace": "alice", "type": "procedure", "source": source, "tags": ["ops\nlog", "tls"],
        "content": "Rotating the staging TLS certificate: renew with cert-manager."},
        headers=key.headers)
    assert made.status_code == 201, made.text
    mid = made.json()["id"]
    assert (await client.get(f"/v1/memories/{mid}", headers=key.headers)).json()["source"] == source
    csrf = await sign_in(client, key.key)
    form = await client.get(f"/ui/memories/{mid}/edit")
    hidden = {k: html.unescape(v) for k, v in re.findall(
        r'<input type="hidden" name="(\w+)" value="([^"]*)"', form.text)}
    shown = {k: html.unescape(v) for k, v in re.findall(
        r'<input name="(\w+)" value="([^"]*)"', form.text)}
    as_browser = {k: v.replace("\r\n", "\n").replace("\n", "\r\n") for k, v in hidden.items()}
    text_inputs = {k: v.replace("\r", "").replace("\n", "") for k, v in shown.items()}
    renamed = await client.post(f"/ui/memories/{mid}/edit", data={
        **as_browser, **text_inputs, "csrf": csrf, "content": form_content(form.text),
        "name": "Rotate the staging certificate", "type": "procedure"})
    assert renamed.status_code == 200, renamed.text
    got = (await client.get(f"/v1/memories/{mid}", headers=key.headers)).json()
    assert got["name"] == "Rotate the staging certificate"
    assert got["source"] == source
    assert got["tags"] == ["ops\nlog", "tls"]


def form_content(page: str) -> str:
    found = re.search(r"<textarea[^>]*name=\"content\"[^>]*>(.*?)</textarea>", page, re.S)
    assert found
    return html.unescape(found.group(1)).lstrip("\n").replace("\n", "\r\n")
