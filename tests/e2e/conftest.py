"""The e2e tests' shared fixtures: the browser of the console tests."""

from tests.support.browser import browser

__all__ = ["browser"]
