"""``state.skills``: the skills a thread can use, and installing or removing skills at run time."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, Protocol

from ..exceptions import DefinitionError, NotFoundError, StandardAgentsError
from ._catalog import enabled_skills, skills_of
from ._format import SkillMetadata
from ._installed import ENV_PREFIX, SkillFiles, decode_skill, encode_skill, skill_from_files
from ._skill import Skill

if TYPE_CHECKING:
    from ..registry import Registry
    from ..store.base import Store

__all__ = ["SkillScope", "SkillsNamespace", "catalogue_text", "fixed_catalogue"]

#: where a skill installed at run time is kept: with the thread, or with the thread's user
#: (then every thread of that user can use it)
SkillScope = Literal["thread", "user"]

LOAD_SKILL_TOOL = "load_skill"


class _Runtime(Protocol):
    @property
    def store(self) -> Store: ...

    @property
    def registry(self) -> Registry: ...


class SkillsOwner(Protocol):
    """What skills need of a thread (the engine's ``ThreadState`` is one): its ids, its
    package namespace, and the runtime's store and registry."""

    @property
    def runtime(self) -> _Runtime: ...

    @property
    def thread_id(self) -> str: ...

    @property
    def user_id(self) -> str | None: ...

    @property
    def namespace(self) -> str | None: ...


class SkillsNamespace:
    """The skills a thread can use (the spec's ``SkillsNamespace``): the project's (or, for a
    packed agent, its package's), those installed for the thread's user, and those installed
    into the thread.

    One is made per ``ThreadState``, so within a turn the installed skills are read from the
    store once (an install or removal through this object is seen at once).
    """

    def __init__(self, state: SkillsOwner) -> None:
        self._state = state
        self._installed: dict[str, Skill] | None = None
        self._blocks: dict[tuple[str, ...], str] = {}

    # reading -------------------------------------------------------------------------------
    async def _stored(self) -> dict[str, Skill]:
        """Installed skills by name: the thread's, then the user's."""
        if self._installed is None:
            store = self._state.runtime.store
            found: dict[str, Skill] = {}
            scopes: list[tuple[Literal["thread", "user"], str]] = [("thread", self._state.thread_id)]
            if self._state.user_id:
                scopes.append(("user", self._state.user_id))
            for scope, scope_id in scopes:
                for key, value in (await store.list_env(scope, scope_id)).items():
                    if not key.startswith(ENV_PREFIX):
                        continue
                    skill = decode_skill(value, scope)
                    if skill is not None:
                        found.setdefault(skill.name, skill)
            self._installed = found
        return self._installed

    def _defined(self) -> list[Skill]:
        return skills_of(self._state.runtime.registry).visible(self._state.namespace)

    async def all(self) -> builtins.list[Skill]:
        """Every skill the thread can use, by name. A name the project (or the package) defines
        is its skill, whatever was installed under it."""
        seen: dict[str, Skill] = {s.name: s for s in self._defined()}
        for skill in (await self._stored()).values():
            seen.setdefault(skill.name, skill)
        return sorted(seen.values(), key=lambda s: s.name)

    async def list(self) -> builtins.list[SkillMetadata]:
        """The metadata of every skill the thread can use, by name."""
        return [s.metadata for s in await self.all()]

    async def get(self, name: str) -> Skill | None:
        """One skill by name, or None."""
        defined = skills_of(self._state.runtime.registry).get(name, self._state.namespace)
        if defined is not None:
            return defined
        return (await self._stored()).get(name)

    async def read(self, name: str) -> str:
        """A skill's instructions (the body of its ``SKILL.md``)."""
        skill = await self.get(name)
        if skill is None:
            raise NotFoundError("skill", name, self._known(await self.all()))
        return skill.instructions

    async def read_file(self, name: str, path: str) -> bytes:
        """One file of a skill, by its path in the skill's folder."""
        skill = await self.get(name)
        if skill is None:
            raise NotFoundError("skill", name, self._known(await self.all()))
        data = skill.read_file(path)
        if data is None:
            raise NotFoundError("skill file", path, f"skill {name!r} has: " + (", ".join(["SKILL.md", *skill.metadata.files])))
        return data

    async def enabled(self, patterns: Sequence[str]) -> builtins.list[Skill]:
        """The skills a prompt's ``skills`` list enables in this thread. A list of names the
        project (or package) defines is answered without reading the store: no installed
        skill can take such a name."""
        defined = self._defined()
        if _only_defined(patterns, defined):
            return enabled_skills(patterns, defined)
        return enabled_skills(patterns, await self.all())

    async def catalogue(self, patterns: Sequence[str]) -> str:
        """The lines the model reads first: each enabled skill's name and description
        (computed once per turn; empty when no skill is enabled)."""
        key = tuple(patterns)
        block = self._blocks.get(key)
        if block is None:
            block = self._blocks[key] = catalogue_text(await self.enabled(patterns))
        return block

    # changing ------------------------------------------------------------------------------
    async def install(self, files: SkillFiles, *, scope: SkillScope = "thread", replace: bool = False) -> SkillMetadata:
        """Install a skill from its files (``SKILL.md`` among them) into the thread, or for the
        thread's user. A bad ``SKILL.md`` or file is a ``DefinitionError`` naming the file and
        the field, and nothing is stored. A name the project (or package) already uses, or
        that the other scope holds, is refused; one this scope holds is replaced only with
        ``replace=True``."""
        scope_id = self._scope_id(scope)
        skill = skill_from_files(files, scope)
        name = skill.name
        if skills_of(self._state.runtime.registry).get(name, self._state.namespace) is not None:
            owner = "the project" if self._state.namespace is None else f"package {self._state.namespace}"
            raise DefinitionError([("SKILL.md: name", f"{name!r} is already the name of a skill of {owner}")], source="skill")
        existing = (await self._stored()).get(name)
        store = self._state.runtime.store
        if existing is not None and existing.metadata.source != scope:
            raise DefinitionError([("SKILL.md: name", f"{name!r} is already installed for the "
                                                      f"{existing.metadata.source}; remove it there first")], source="skill")
        if not replace and await store.get_env(scope, scope_id, ENV_PREFIX + name) is not None:
            raise DefinitionError([("SKILL.md: name", f"{name!r} is already installed for the {scope} "
                                                      "(pass replace=True to replace it)")], source="skill")
        await store.set_env(scope, scope_id, ENV_PREFIX + name, encode_skill(skill))
        self._changed()
        return skill.metadata

    async def remove(self, name: str, *, scope: SkillScope = "thread") -> bool:
        """Remove a skill installed into the thread or for its user; False when there was none."""
        removed = bool(await self._state.runtime.store.delete_env(scope, self._scope_id(scope), ENV_PREFIX + name))
        self._changed()
        return removed

    # helpers -------------------------------------------------------------------------------
    def _scope_id(self, scope: str) -> str:
        if scope == "thread":
            return self._state.thread_id
        if scope == "user":
            if not self._state.user_id:
                raise StandardAgentsError("this thread has no user: install the skill into the thread (scope='thread')")
            return self._state.user_id
        raise StandardAgentsError(f"scope: {scope!r} is not 'thread' or 'user'")

    def _changed(self) -> None:
        self._installed = None
        self._blocks.clear()

    @staticmethod
    def _known(skills: Sequence[Skill]) -> str:
        return "known: " + (", ".join(s.name for s in skills) or "none")


def _only_defined(patterns: Sequence[str], defined: Sequence[Skill]) -> bool:
    names = {s.name for s in defined}
    return all(p in names for p in patterns)


def fixed_catalogue(registry: Registry, namespace: str | None, patterns: Sequence[str]) -> str | None:
    """The skills block of a prompt whose ``skills`` list names only skills the project (or
    package) defines: the same in every thread, so it can join the static system prompt.
    None when the list could match skills installed at run time (``*``, a prefix, another name)."""
    defined = skills_of(registry).visible(namespace)
    if not _only_defined(patterns, defined):
        return None
    return catalogue_text(enabled_skills(patterns, defined))


def catalogue_text(skills: Sequence[Skill]) -> str:
    """The skills block of the system prompt: one line per skill, name and description."""
    if not skills:
        return ""
    lines = [f"Skills: instructions for particular tasks, loaded on demand. When a task matches a skill, "
             f"call `{LOAD_SKILL_TOOL}` with its name first and follow what it says:"]
    lines += [f"- {s.name}: {s.description}" for s in skills]
    return "\n".join(lines)
