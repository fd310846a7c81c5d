import runtime.plugins


def test_exports_are_pinned_and_sorted() -> None:
    # dir(), not vars(): the hook specifications' names load on first use.
    public = sorted(n for n in dir(runtime.plugins) if not n.startswith("_") and n != "annotations")
    assert runtime.plugins.__all__ == sorted(runtime.plugins.__all__) == public
    assert all(getattr(runtime.plugins, n) is not None for n in public)


def test_the_sdk_names_plugins_use() -> None:
    sdk = {"hookimpl", "plugin_tool", "PluginContext", "Refusal", "ToolCall", "ChatParams",
           "CompactionPrompt", "SystemContext", "ToolOutput", "ToolFailure", "ToolError", "Tool"}  # fmt: skip
    assert sdk <= set(runtime.plugins.__all__)
