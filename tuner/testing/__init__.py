"""Fakes and fixtures that ship with the package: real code used by the tests."""
