"""
:class:`ApiView`: a JSON view base that turns errors into ``{"error": ...}`` responses.
"""
from __future__ import annotations

import logging
from typing import Any

from django.http import HttpRequest, HttpResponseBase, JsonResponse
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.csrf import csrf_exempt
from pynamodb_counters.exceptions import CounterUnderflowError, RetriesExhaustedError, TransactionError

__all__ = ["ApiError", "ApiView"]

log = logging.getLogger(__name__)


class ApiError(Exception):
    """An error answered as ``{"error": message}`` with ``status``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@method_decorator(csrf_exempt, name="dispatch")  # an API for non-browser clients: no CSRF cookie
class ApiView(View):
    """A view whose errors are JSON: :class:`ApiError`, and the library's errors an HTTP client can act on."""

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        """Dispatch, answering errors with JSON."""
        try:
            return super().dispatch(request, *args, **kwargs)
        except ApiError as error:
            return JsonResponse({"error": error.message}, status=error.status)
        except RetriesExhaustedError as error:  # DynamoDB stayed busy: retry, with the same Idempotency-Key
            response = JsonResponse({"error": "DynamoDB is busy; retry", "may_have_committed": error.ambiguous},
                                    status=503)
            response["Retry-After"] = "1"
            return response
        except TransactionError as error:
            if error.cause_response_code == "IdempotentParameterMismatchException":  # DynamoDB only, not moto
                return JsonResponse({"error": "this Idempotency-Key was used for a different request"}, status=422)
            log.error("counted write rejected: %s", error)
            return JsonResponse({"error": "internal error"}, status=500)
        except CounterUnderflowError as error:  # a drifted counter: recount and set_counter()
            log.error("counter drift on %s: %s", error.key, error)
            return JsonResponse({"error": "internal error"}, status=500)

    def http_method_not_allowed(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        """405 as JSON, with ``Allow``."""
        response = JsonResponse({"error": f"{request.method} is not allowed here"}, status=405)
        response["Allow"] = ", ".join(m.upper() for m in self._allowed_methods())
        return response
