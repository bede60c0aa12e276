"""attncore.mechanisms: measurements that show why attention is built as it is, on random inputs or small models.

demos (the √d_k statistics, masks, permutation equivariance, position encodings), attention_cost (time and
memory of T × T scores), gradcheck (finite differences against the hand-written backward pass). It may import
the core of attncore (config, layers, model, tasks) and NumPy; nothing of serving, lab, ui or cli.
"""
