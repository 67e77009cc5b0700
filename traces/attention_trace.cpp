// placeholder until the trace reader lands
