from container import config_reference


def test_configuration_reference_is_fresh():
    assert config_reference.TARGET.read_text(encoding="utf-8") == config_reference.render(), (
        "docs/configuration.md is stale: run python -m container.config_reference")
