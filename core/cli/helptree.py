"""The command line as a tree of subcommands, each with its own help and examples, the way git and
kubectl show theirs: ``python main.py ctl RUN why --help`` prints why's usage, what it does and
how it is typed, not the whole ``ctl``'s.

- :func:`command`: a subcommand with a one-line summary (listed by its parent), a description and
  examples (printed under its ``--help``).
- :class:`TopicHelp`: ``-h``/``--help`` for a parser whose actions are the values of one positional
  (``runs compare``, ``runs tensorboard``), or that is asked for help before a positional it needs
  (``ctl why --help``, the run not named yet): the help of the action named.
- :func:`walk`: every subcommand, recursively, with the arguments that reach its help.
"""

from __future__ import annotations

import argparse
import copy
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from core.textsafe import terminal

# Descriptions and examples are written line by line: argparse would join and rewrap them.
FORMATTER = argparse.RawDescriptionHelpFormatter

Example = tuple[str, str]  # (what it does, the command line)


def examples_text(examples: Sequence[Example]) -> str:
    """Examples as kubectl prints them: a ``#`` line saying what, then the command; an example with
    no words of its own goes on under the one before it."""
    lines = ["examples:"]
    for what, line in examples:
        if what:
            lines += ["", f"  # {what}"]
        lines.append(f"  {line}")
    return "\n".join(lines[:1] + lines[2:])


class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line: what is wrong, an example of the command
    typed right, and where its help is (argparse prints its usage block and the error under it)."""

    example: str | None = None  # the first of the command's examples, set by command()

    def error(self, message: str) -> NoReturn:
        hint = f"e.g. `{self.example}`; " if self.example else ""
        # The message may quote what was typed (unrecognized arguments: as typed): escaped.
        self.exit(2, terminal(f"{self.prog}: error: {message} ({hint}`{self.prog} --help` for more)") + "\n")


def command(
    sub: Any,
    name: str,
    *,
    summary: str,
    description: str,
    examples: Sequence[Example],
    add_help: bool = True,
) -> argparse.ArgumentParser:
    """A subcommand of ``sub`` (a parser's ``add_subparsers()``): ``summary`` is its line in the
    parent's list, ``description`` and ``examples`` its own ``--help``."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        help=summary,
        description=description,
        epilog=examples_text(examples),
        formatter_class=FORMATTER,
        add_help=add_help,
    )
    if isinstance(parser, Parser) and examples:
        parser.example = examples[0][1]
    return parser


class TopicHelp(argparse.Action):
    """``-h``/``--help`` that prints the help of the action a positional names, when it names one.

    argparse fills the positionals typed before ``--help`` first, so ``runs compare --help`` finds
    ``compare`` in the namespace, and ``ctl why --help`` finds ``why`` where the run would be."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        self.key: str = kwargs.pop("key")
        self.topics: dict[str, argparse.ArgumentParser] = kwargs.pop("topics")
        kwargs.setdefault("help", "show this help (with an action: that action's help) and exit")
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> NoReturn:
        named = getattr(namespace, self.key, None)
        chosen = self.topics.get(named) if isinstance(named, str) else None
        (chosen or parser).print_help()
        parser.exit()


def add_topic_help(parser: argparse.ArgumentParser, *, key: str) -> dict[str, argparse.ArgumentParser]:
    """Give ``parser`` (made with ``add_help=False``) a :class:`TopicHelp` on the positional ``key``;
    returns the topics, filled by :func:`topic` or with the parser's own subcommands."""
    topics: dict[str, argparse.ArgumentParser] = {}
    parser.add_argument("-h", "--help", action=TopicHelp, key=key, topics=topics)
    return topics


def topic(
    parent: argparse.ArgumentParser,
    topics: dict[str, argparse.ArgumentParser],
    name: str,
    *,
    description: str,
    examples: Sequence[Example],
    dests: Sequence[str],
    metavars: dict[str, str] | None = None,
) -> None:
    """The help of ``parent``'s action ``name`` (``runs compare``): its description, examples, and
    the arguments of ``parent`` it takes (``dests``), shown as they are defined there, so the two
    cannot disagree; ``metavars`` renames a positional for this action (``RUN``)."""
    helper = argparse.ArgumentParser(
        prog=f"{parent.prog} {name}",
        description=description,
        epilog=examples_text(examples),
        formatter_class=FORMATTER,
    )
    by_dest = {a.dest: a for a in parent._actions}
    for dest in dests:
        action = copy.copy(by_dest[dest])
        if metavars and dest in metavars:
            action.metavar = metavars[dest]
        helper._add_action(action)
    topics[name] = helper


@dataclass(frozen=True)
class Node:
    """One subcommand of the tree: its words (``["ctl", "why"]``), the arguments that print its
    help (``["ctl", "RUN", "why", "--help"]``) and its parser."""

    words: tuple[str, ...]
    help_argv: tuple[str, ...]
    parser: argparse.ArgumentParser


def walk(parser: argparse.ArgumentParser) -> Iterator[Node]:
    """Every subcommand under ``parser``, depth first: real subparsers (a positional typed before
    them, as ``ctl``'s run, given its metavar) and :class:`TopicHelp` topics."""
    yield from _walk(parser, (), (), seen={id(parser)})


def _walk(
    parser: argparse.ArgumentParser, words: tuple[str, ...], argv: tuple[str, ...], *, seen: set[int]
) -> Iterator[Node]:
    # Subparsers first: a TopicHelp that lists the same parsers (``ctl why --help``) is a shortcut
    # to them, and the tree names each by its full spelling (``ctl RUN why``).
    before: list[str] = []  # positionals typed before the subcommand's name
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                if id(child) in seen:
                    continue
                seen.add(id(child))
                node = Node((*words, name), (*argv, *before, name, "--help"), child)
                yield node
                yield from _walk(child, node.words, node.help_argv[:-1], seen=seen)
        elif not action.option_strings:
            before.append(str(action.metavar or action.dest).upper())
    for action in parser._actions:
        if isinstance(action, TopicHelp):
            for name, child in action.topics.items():
                if id(child) not in seen:
                    seen.add(id(child))
                    yield Node((*words, name), (*argv, name, "--help"), child)
