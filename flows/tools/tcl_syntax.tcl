# Parse-only syntax check of Tcl scripts with a plain tclsh (no Vivado or Vitis needed):
#
#   tclsh flows/tools/tcl_syntax.tcl FILE...
#
# Splits each file into commands the way the Tcl parser does (a command ends at a newline or
# ';' once `info complete` accepts it), so an unbalanced brace, bracket or quote is reported with
# the line where the broken command starts. Bodies of if/foreach/proc/... are checked the same
# way, recursively, since they are scripts too. Nothing is executed: tool commands such as
# create_project or package_xo are never looked up.

proc report {file line msg} {
  puts stderr "$file:$line: $msg"
}

# Checks one script (text starting at line `first` of `file`); returns the number of errors.
proc check_script {file text first} {
  set errors 0
  set cmd ""
  set start $first
  set line $first
  foreach l [split $text "\n"] {
    if {$cmd eq ""} {
      set start $line
      set cmd $l
    } else {
      append cmd "\n" $l
    }
    incr line
    if {[info complete $cmd]} {
      incr errors [check_bodies $file $cmd $start]
      set cmd ""
    }
  }
  if {[string trim $cmd] ne ""} {
    report $file $start "command not complete at the end of the script (unbalanced \{, \[ or \")"
    incr errors
  }
  return $errors
}

# The braced words of a complete command that are scripts themselves, checked recursively.
proc check_bodies {file cmd start} {
  set trimmed [string trimleft $cmd]
  if {$trimmed eq "" || [string index $trimmed 0] eq "#"} { return 0 }
  if {[catch {set words [lrange $cmd 0 end]}]} {
    # Not a proper list (e.g. a quoted word followed by text): the parser would still accept
    # it if `info complete` did, so there is nothing more to look into.
    return 0
  }
  set errors 0
  set name [lindex $words 0]
  # Which words are scripts, by command.
  switch -- $name {
    proc    { set idx {3} }
    foreach { set idx [list [expr {[llength $words] - 1}]] }
    while   { set idx {2} }
    for     { set idx {1 3 4} }
    catch   { set idx {1} }
    if {
      set idx {}
      for {set i 1} {$i < [llength $words]} {incr i} {
        set w [lindex $words $i]
        if {$w eq "then" || $w eq "else" || $w eq "elseif"} { continue }
        # Condition words follow "if" and "elseif"; the others are bodies.
        set prev [lindex $words [expr {$i - 1}]]
        if {$prev eq "if" || $prev eq "elseif"} { continue }
        if {$i == 1} { continue }
        lappend idx $i
      }
    }
    default { set idx {} }
  }
  foreach i $idx {
    if {$i < [llength $words]} {
      incr errors [check_script $file [lindex $words $i] $start]
    }
  }
  return $errors
}

if {$argc == 0} {
  puts stderr "usage: tclsh tcl_syntax.tcl FILE..."
  exit 2
}
set total 0
foreach f $argv {
  if {[catch {open $f r} fh]} {
    report $f 0 "cannot open: $fh"
    incr total
    continue
  }
  set text [read $fh]
  close $fh
  set n [check_script $f $text 1]
  if {$n == 0} {
    puts "ok   $f"
  } else {
    puts "FAIL $f ($n error(s))"
  }
  incr total $n
}
exit [expr {$total == 0 ? 0 : 1}]
