"""The one HTTP client of ctxpack (service/remote.py), against the app as a server answers."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI

from service.errors import ServiceUnavailable
from service.remote import CtxpackHttp, RemoteError, api_key_from_env, error_body
from service.schemas.common import WhoAmI
from tests.conftest import Key


async def test_an_answer_comes_back_as_its_model(app: FastAPI, key: Key) -> None:
    async with CtxpackHttp("http://test/", key.key, agent="t", timeout=5,
                           transport=httpx.ASGITransport(app=app)) as http:
        who = await http.call("GET", "/v1/whoami", WhoAmI)
    assert who.org_id == str(key.org_id)


async def test_a_refusal_carries_the_servers_error(app: FastAPI) -> None:
    async with CtxpackHttp("http://test", "ctxp_wrong", agent="t", timeout=5,
                           transport=httpx.ASGITransport(app=app)) as http:
        with pytest.raises(RemoteError) as raised:
            await http.call("GET", "/v1/whoami", WhoAmI)
    assert raised.value.status_code == 401
    assert raised.value.body["code"] == "unauthorized"


async def test_a_server_out_of_reach_is_unavailable() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    async with CtxpackHttp("http://nowhere", "k", agent="t", timeout=5,
                           transport=httpx.MockTransport(refuse)) as http:
        with pytest.raises(ServiceUnavailable) as raised:
            await http.send("GET", "/v1/whoami")
    assert "ConnectError" in str(raised.value)


def test_an_answer_without_an_error_body_gets_one_from_its_status() -> None:
    assert error_body(httpx.Response(502, text="<html>bad gateway</html>"))["code"] == "unavailable"
    assert error_body(httpx.Response(404, text="nope"))["code"] == "http_error"
    body = {"error": {"code": "conflict", "message": "m", "field": "key"}}
    assert error_body(httpx.Response(409, json=body)) == body["error"]


def test_the_key_comes_from_ctxpack_api_key_and_the_old_name_warns(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("CTXPACK_API_KEY", raising=False)
    monkeypatch.delenv("CTXPACK_KEY", raising=False)
    assert api_key_from_env() is None
    monkeypatch.setenv("CTXPACK_KEY", "ctxp_old")
    assert api_key_from_env() == "ctxp_old"
    assert "CTXPACK_KEY is deprecated" in capsys.readouterr().err
    monkeypatch.setenv("CTXPACK_API_KEY", "ctxp_new")
    assert api_key_from_env() == "ctxp_new"
    assert capsys.readouterr().err == ""
