"""ui.charts: pure functions from DataFrames (or arrays) to Altair charts, one module per page group.

runs (Train, Results, Attention, Length, Ablations: losses, accuracies, attention maps; the shared colours),
compare (Compare), calculators (Parameters, KV cache), and the mechanism pages: scaling, masks, position
(Heads & position), cost and gradcheck. No streamlit: testable without a browser. May import attncore
(constants and result types), pandas, numpy and altair; nothing of lab, the rest of ui, or app_pages.
"""
