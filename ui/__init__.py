"""RankScope's user interface: ``ui.present`` builds figures and HTML from the library's data (no
Gradio; the CLI's report export uses it too), and one module per view of the Gradio app."""
