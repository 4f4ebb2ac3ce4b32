"""briefd's exceptions, as one tree: what each means, and who catches it (httpx's _exceptions.py is the model).

Every exception briefd raises on purpose derives from `BriefdError`; any other exception is a bug, or an
input nobody foresaw. Where a class also keeps a built-in base (ValueError, OSError, RuntimeError,
httpcore.ConnectError), that base is kept so the callers that catch it, briefd's and the libraries',
still do. The classes live beside the code that raises them; this drawing is the one place that shows
them all, and tests/core/test_errors.py fails when it and the code disagree. Private classes (a leading
underscore) are signals inside one module, never raised past it, and are not drawn.

* BriefdError                                   briefd/errors.py: the root (store/ imports nothing of the daemon)
  * ServiceUnavailable                          here: a service briefs need is out; they wait, never fail
    * Outage                                    research/run.py: SearXNG out through the loop's retries
    * ServiceDown                               model/llm.py: the model server unreachable or answering 5xx
    * ModelMissing                              model/llm.py: the model is not pulled, or not served (404)
    * ModelRefused                              model/llm.py: the model server refuses briefd (a 4xx, its probe too)
    * SearchRefused                             sources/search.py: SearXNG refuses us (json off, limiter on)
    * SearchUnavailable                         sources/search.py: SearXNG unreachable or 5xx (also Transient)
      * EnginesFailing                          sources/search.py: SearXNG runs, its engines fail
    * WriteFailed                               core/files.py: the outbox cannot be written (OSError)
  * Transient                                   core/retry.py: worth trying again within one call
    * RetryAtOnce                               core/retry.py: the next try waits it out itself (a crashed runner)
  * Cancelled                                   research/run.py: `briefd cancel` reached a running brief
  * BriefError                                  core/briefjson.py: a brief refused (ValueError): field, why, fix
  * SettingsError                               core/settings.py: a setting refused (ValueError)
  * ScheduleError                               core/schedule.py: a duration or schedule refused (ValueError)
  * TooLarge                                    core/files.py: an input over its size limit (ValueError)
  * NestedTooDeep                               core/jsontext.py: JSON nested past MAX_DEPTH (ValueError)
  * Locked                                      core/files.py: another briefd holds the lock
  * AnswerError                                 model/jsonrepair.py: the model's answer holds no usable JSON
  * ModelHTTPError                              model/wire.py: a model server's HTTP error, read by model/llm.py
  * DocumentUnavailable                         sources/sources.py: a library document or article unreadable
    * ArchiveError                              sources/zim.py: a ZIM archive or its entry
      * BadArchiveUrl                           sources/zim.py: a zim:// URL that names nothing
      * EntryRefused                            sources/zim.py: an entry briefd will not read
      * ReaderUnavailable                       sources/archives.py: the archive reader is not running
  * DocumentRefused                             sources/documents.py: a document briefd will not read
  * PageUnreadable                              sources/pagework.py: a page too costly to read, for good
    * PageRefused                               sources/pagework.py: a page the reader refused, and why
  * BodyRefused                                 sources/fetch.py: a body briefd will not decode (ValueError)
  * RefusedConnect                              sources/egress.py: a connection the egress policy refuses
  * EvalFileError                               ops/evaluate.py: an eval set that cannot be used (ValueError)
  * PatternTooSlow                              ops/evaluate.py: an eval pattern past its time bound (TimeoutError)
  * EvalWorkError                               ops/eval_run.py: a --work folder eval must not use (ValueError)
  * VectorFileError                             ops/vectors.py: a rule-vector file that cannot be used (ValueError)
  * ServeError                                  ops/access.py: the HTTP API cannot start as set (ValueError)
  * BadId                                       ops/api.py: an id in a URL no brief can have (ValueError)
  * NotServed                                   ops/api.py: a file the API will not serve (ValueError)
  * StoreUnavailable                            store/db.py: the store fails in a way only the user can fix
  * SchemaTooNew                                store/db.py: a store written by a newer briefd (RuntimeError)
  * HistoryError                                store/history.py: a filter or search text refused (ValueError)

Who catches what: the worker (ops/worker.py, Daemon.run_brief) catches `ServiceUnavailable` once and puts
the brief back on the queue to wait (its `service`, `reason` and `fix` are what the log, the events and
`run --once`'s give-up line say); `Cancelled` ends a brief with what it found; `BriefError` fails it; any
other exception is retried a few times, then fails the brief, unless the store itself failed, which stops
the daemon (exit 3). The research loop turns SearXNG's failures into `Outage`, which ends the round.
"""

from __future__ import annotations

from briefd.errors import BriefdError

__all__ = ["BriefdError", "ServiceUnavailable"]


class ServiceUnavailable(BriefdError):
    """A service briefs need is out (the model server, SearXNG, the outbox's disk): briefs wait, never fail.

    `service` names it as the daemon's log and events do ("ollama", "searxng", "outbox"); `reason` is the
    one line said while briefs wait for it; `fix` is what ends the outage when that is not the service
    coming back (a model to pull, SearXNG's engines, a full disk), else None. A subclass with its own
    wording passes `said`, the exception's message; otherwise it is "<service> is unavailable: <reason>".
    """

    service: str
    reason: str
    fix: str | None

    def __init__(self, service: str, reason: str, fix: str | None = None, *, said: str | None = None) -> None:
        super().__init__(said if said is not None else f"{service} is unavailable: {reason}")
        self.service = service
        self.reason = reason
        self.fix = fix
