"""Parameters: params.yaml typed and validated (config), the dataset section, presets,
sweep specs and edits of params.yaml that keep its comments."""
