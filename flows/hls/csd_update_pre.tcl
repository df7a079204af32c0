# Vitis HLS directives for csd_update, sourced before synthesis: v++ -c --hls.pre_tcl <this file>
# (flows/Makefile). Tcl form, for the classic v++ kernel compile that the SmartSSD platform's
# tools (Vitis 2021.1/2021.2) run.
#
# The numeric contract (docs/numeric-contract.md): a*b+c is a rounded product followed by a
# rounded sum, everywhere. Vitis HLS may otherwise combine a float multiply and add into one
# fused operator (fmadd, fmacc) or an accumulator (facc) with a single rounding; `-impl none`
# disables the inference of all three. The config_op reference of UG1399 lists fmadd, fmacc,
# facc and `-impl none` in recent releases but not in 2020.2; whether 2021.1 accepts them has
# not been tried here (no Vitis on the development machines). Do not drop these lines to make an
# older tool accept the script: check instead that the synthesis report lists no fmadd, fmacc or
# facc instance, and state the tool version in the build notes.
#
# The same three directives, in config-file syntax, are in csd_update_hls.cfg; the
# flows_consistency ctest checks that both files carry exactly these bindings.
config_op fmadd -impl none
config_op fmacc -impl none
config_op facc -impl none
