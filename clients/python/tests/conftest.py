"""Fixtures: a database URL from SKIPLOCK_TEST_DATABASE_URL and fresh queue names.

The Go test clients/python/python_test.go creates a migrated throwaway database
and runs this suite against it. Every test works in queues of its own, so tests
never see each other's jobs.
"""

import os
import uuid

import psycopg
import pytest

import skiplock


@pytest.fixture(scope="session")
def db_url():
    url = os.environ.get("SKIPLOCK_TEST_DATABASE_URL")
    if not url:
        pytest.skip("SKIPLOCK_TEST_DATABASE_URL is not set (go test ./clients/python sets it)")
    return url


@pytest.fixture
def queue():
    return "py-" + uuid.uuid4().hex[:12]


@pytest.fixture
def client(db_url):
    c = skiplock.Client(db_url)
    yield c
    c.close()


@pytest.fixture
def conn(db_url):
    c = psycopg.connect(db_url, autocommit=True)
    yield c
    c.close()
