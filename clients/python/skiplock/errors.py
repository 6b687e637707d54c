"""Errors raised by the skiplock client."""

from __future__ import annotations

import psycopg


class SkiplockError(Exception):
    """Base class of the errors this package raises itself."""


class InvalidArgument(SkiplockError, ValueError):
    """A skiplock function rejected an argument (SQLSTATE 22023).

    ``parameter`` is the SQL parameter's name as the function reported it in the
    error's COLUMN field (``max_jobs``, or ``kinds[2]`` for an element of an
    array argument), so a program can tell which argument was wrong without
    parsing ``message``.
    """

    def __init__(self, parameter: str | None, message: str):
        super().__init__(message)
        self.parameter = parameter
        self.message = message


def translate(err: psycopg.Error) -> Exception:
    """The exception to raise for a database error: InvalidArgument for 22023, else err."""
    if err.sqlstate == "22023":
        return InvalidArgument(err.diag.column_name, err.diag.message_primary or str(err))
    return err
