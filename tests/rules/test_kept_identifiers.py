"""What the agent reuses survives the rules that shorten tool output: the newest result
is not cut below what the agent is about to read, a capped result names the
identifiers of its cut middle, an aged stub names those of its output, and a summary
indexes those of the results it folds (issue 21: each of these lost a name the agent's
next call used)."""

from __future__ import annotations

from ctxrules.commit import Pipeline, derive_commit
from ctxrules.model import ContextItem, Node, TextBlock, ToolResultBlock, ToolUseBlock
from ctxrules.quality.text import request_text
from ctxrules.render import render
from ctxrules.rules import ResultCap, ToolAging
from ctxrules.summarizers import ExtractiveSummarizer

T0 = 1_767_225_600.0


def _log(n: int, needle: str) -> str:
    lines = [f"{i:05d} window {i % 7} ok" for i in range(n)]
    lines[n // 2] = f"{n // 2:05d} window 3 {needle}"
    return "\n".join(lines)


def _turns(results: list[str]) -> list[Node]:
    """A user request, then one assistant turn per result, each calling Bash."""
    nodes = [Node(id="u", seq=0, created_at=T0, role="user", output="Why is tmux slow?")]
    prev = "u"
    for k, text in enumerate(results):
        a = f"a{k}"
        use = ToolUseBlock(id=f"t{k}", name="Bash", input={"command": f"tmux-debug {k}"})
        nodes.append(
            Node(
                id=a,
                seq=len(nodes),
                created_at=T0 + k,
                role="assistant",
                output=[TextBlock(text="Checking."), use],
                predecessor=prev,
            )
        )
        nodes.append(
            Node(
                id=f"r{k}",
                seq=len(nodes),
                created_at=T0 + k,
                role="tool",
                name="Bash",
                input=use.input,
                caller=a,
                output=[ToolResultBlock(tool_use_id=use.id, content=text)],
                metadata={"tool_use_id": use.id},
            )
        )
        prev = a
    return nodes


def _text(nodes: list[Node], *rules) -> str:
    commit = derive_commit(
        None,
        nodes,
        session_id="s",
        head_node_id=nodes[-1].id,
        pipeline=Pipeline.of(list(rules)),
        now=T0 + 100,
    ).commit
    return request_text(render(commit, "anthropic", "claude-sonnet-4-5").body)


def test_the_newest_result_is_not_cut_below_what_the_agent_reads_next():
    # A 10,256-character result arrives; the agent's next call uses pane_exists from its
    # middle.  The default cap (4,000 characters) cut it on arrival (today's code).
    result = _log(560, "slow: pane_exists polled 900 times")
    assert len(result) > 9_000
    nodes = _turns([result])
    assert "pane_exists" in _text(nodes, ResultCap())
    # Once an answer follows, the result is capped, and its marker names pane_exists.
    later = _turns([result, "ok"])
    text = _text(later, ResultCap())
    assert "characters cut; identifiers in the cut part:" in text and "pane_exists" in text


def test_an_aged_stub_names_the_identifiers_of_its_output():
    nodes = _turns([_log(200, "error in src/tmux/pane.py: pane_exists timed out"), "ok", "ok"])
    text = _text(nodes, ToolAging(tail_turns=1, step_turns=1))
    assert "output: 00000 window" in text  # the stub, not the result
    assert "src/tmux/pane.py" in text and "pane_exists" in text


def test_a_summary_keeps_the_identifiers_of_the_results_it_folds():
    # Two command outputs (thousands of characters each) folded: the summary said
    # "Tools used: Bash ×2" and nothing of what they printed (today's code); the
    # agent's next call named paths from them.
    outputs = [
        "\n".join(f"drwxr-xr-x lib/session/store_{i}.py" for i in range(60))
        + "\nlib/tmux/pane_registry.py",
        "\n".join(f"{i:04d} INFO poll ok" for i in range(200))
        + "\nWARN cmd/entire/hooks_handler.go slow",
    ]
    items = [ContextItem(source_node_id="u", role="user", rendered="List the modules.")]
    for k, out in enumerate(outputs):
        items.append(ContextItem(source_node_id=f"a{k}", role="assistant", rendered="Looking."))
        items.append(
            ContextItem(
                source_node_id=f"r{k}",
                role="tool",
                name="Bash",
                caller=f"a{k}",
                tool_use_id=f"t{k}",
                tool_input='{"command": "ls -R"}',
                rendered=out,
            )
        )
    summary = ExtractiveSummarizer().summarize(items, budget=2000)
    assert "lib/tmux/pane_registry.py" in summary
    assert "cmd/entire/hooks_handler.go" in summary
