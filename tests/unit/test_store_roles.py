"""The role views of the Store (:mod:`tickwork.store.roles`) are views of it: the Store and
both dialect stores satisfy each one, and each view's calls read as the Store's do.

mypy proves the first (``as_roles`` below, and every service typed with its view); what it
does not compare is a default value, nor a parameter's name where the call passes it by
position, which the tests here do.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from tickwork.store.base import Store
from tickwork.store.postgres import PostgresStore
from tickwork.store.roles import LeaderStore, NodeRegistry, WorkerStore
from tickwork.store.sqlite import SqliteStore

ROLES: tuple[type[Any], ...] = (WorkerStore, LeaderStore, NodeRegistry)
STORES: tuple[type[Store], ...] = (Store, SqliteStore, PostgresStore)


def as_roles(store: Store) -> tuple[WorkerStore, LeaderStore, NodeRegistry]:
    """Checked by mypy, never called: any Store is each of the views."""
    return store, store, store


DIALECT_ROLES: tuple[type[WorkerStore], type[LeaderStore], type[NodeRegistry]] = (
    SqliteStore,
    PostgresStore,
    SqliteStore,
)
"""Checked by mypy: the concrete stores are the views too (as classes)."""


def members(role: type[Any]) -> list[str]:
    """The names a view declares, its bases' included."""
    return sorted(
        name
        for klass in role.__mro__
        if klass.__module__ == "tickwork.store.roles"
        for name in vars(klass)
        if not name.startswith("_")
    )


def shape(function: Any) -> list[tuple[str, Any, Any]]:
    """A callable's parameters: name, kind and default (annotations are mypy's to check)."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


def declares(store: type[Any], name: str) -> bool:
    """Whether ``store`` has ``name``: a method, a class attribute, or an attribute its
    instances set (``health``: annotated on the class)."""
    return hasattr(store, name) or any(name in inspect.get_annotations(k) for k in store.__mro__)


def test_each_view_names_only_store_members() -> None:
    for role in ROLES:
        assert members(role)
        for name in members(role):
            assert declares(Store, name), f"{role.__name__}.{name} is not a Store member"


@pytest.mark.parametrize("store", STORES, ids=lambda s: s.__name__)
@pytest.mark.parametrize("role", ROLES, ids=lambda r: r.__name__)
def test_a_views_calls_take_the_stores_parameters_and_defaults(
    role: type[Any], store: type[Store]
) -> None:
    for name in members(role):
        declared = inspect.getattr_static(role, name)
        if isinstance(declared, property):
            assert declares(store, name), name
            continue
        assert shape(getattr(role, name)) == shape(getattr(store, name)), name


def test_the_worker_and_the_leader_share_only_the_registry_and_the_wakeups() -> None:
    shared = set(members(WorkerStore)) & set(members(LeaderStore))
    assert shared == {*members(NodeRegistry), "capabilities", "listener", "next_due_at"}
