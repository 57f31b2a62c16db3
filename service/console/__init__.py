"""The web console at /ui: see and curate what agents remembered.

Server-rendered (Jinja2 templates and static files inside this package; no Node build, no
CDN; one small script of our own, and every page works without it). A person signs in by
pasting an API key once; the browser then holds only a session cookie (see
``service.domain.console``). Every action goes through ``calls.py``, the same domain calls,
scopes, rate limit, unit of work and audit rows as the HTTP API.

    calls.py     the one adapter into the domain: the call runner (service/calls.py)
    mount.py     install(): the router, the static files and the headers
    pages.py     the page handlers (thin: parse, call, render)
    security.py  CSP and other headers, the session cookie, CSRF
    charts.py    server-side SVG charts
"""

