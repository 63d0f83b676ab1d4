/*
 * SPDX-License-Identifier: MIT
 *
 * A Promela model of the segment protocol: the writer's commit (writer.c,
 * commit_begin / commit_end), a writer killed at any step and the next
 * writer's recovery from the backup line (writer.c, recover), and readers on
 * the fast path (reader.c, now_fast), on the dead-writer path (protocol.c,
 * wait_writer and shmclock__snapshot) and on the stuck-writer path (a live
 * writer mid-update: the last committed time, capped at the anchor the
 * writer published, T0..T4). With -DLOCKSTEP, the lockstep protocol
 * instead (lockstep_*.c; the model is at the end of this file).
 * tests/lib/spin_check.sh runs both with spin in CI, together with mutants
 * that must fail.
 *
 * Checked, in every interleaving:
 *   - no torn state: every parameter set a reader evaluates was committed
 *     as a whole (the ghost history hist_* holds each commit's fields);
 *   - time never goes backwards across readers: a read that starts after
 *     another read has returned gets (jump epoch, value) no smaller, in
 *     lexicographic order (a jump starts a new epoch and may go back);
 *   - the jump-free time (simulation time minus the sum of all jumps,
 *     shmclock_now_monotonic(), the shim's CLOCK_MONOTONIC) never goes
 *     backwards across readers, jumps included. The model's jumps go back
 *     by one, so the sum is kept as jb, the number of jumps back, and the
 *     jump-free time is value + jb.
 *
 *   - a change scheduled at a later instant (freeze_at, W2b: the anchor
 *     is a future clock value, readers run on to it and stop there) is
 *     never seen before its instant: a read whose clock reading is before
 *     a commit's anchor returns no more than the previous function gives
 *     there (ghost hist_eff, the anchor of each commit);
 *   - with -DWITHDRAW (implies FREEZE), once in a run, an update
 *     freeze_at opened is withdrawn instead (writer.c,
 *     shmclock_writer_withdraw: X1, X2), before or after its instant and
 *     with or without a decision possible later: every check above holds
 *     across it. Mutant WITHDRAW_KEEPS_ANCHOR (X2 left out) must fail: a
 *     reader that finds the next update open before W2a takes the
 *     withdrawn anchor for that update's.
 *   - with -DSTALE, the stale mark (SHMCLOCK_F_STALE, in the record's
 *     flags) comes with the time of the commit that set it: a reader never
 *     pairs one commit's mark with another's function (field st, checked
 *     with the rest as not torn; a follower marks and clears it with a
 *     commit of its own, or together with a function from its leader).
 *     A commit of its own keeps the function (writer.c, W2n): it publishes
 *     no cap (SHMCLOCK_ANCHOR_NONE, here 255), so a reader that finds it
 *     in progress evaluates the function at its own clock reading instead
 *     of freezing at an anchor, and withdraws the anchor after its commit
 *     (X2). Mutants SAME_KEEPS_ANCHOR (X2 left out: the next update's
 *     readers before its W2a take "no cap" for that update's) and
 *     SAME_MOVES_FUNCTION (no cap for a pause) must fail.
 *     Without it the mark stays clear and adds no state.
 *   - with -DAHEAD (implies FREEZE), a change decided ahead (writer.c,
 *     set_function with SHMCLOCK_FN_AHEAD: the next line N1, next_seq N2,
 *     before the instant): readers switch to it at its anchor by
 *     themselves, alive writer (T4) or dead (S5), never before it (the
 *     check above), never torn; a writer killed after N2 leaves the
 *     decision standing: the next writer completes it at its instant
 *     (V6). The decision carries its instant in the
 *     next line (n_anc): with -DINTRUDER a writer opening the segment
 *     withdraws anchor_mono_ns (V0) at any moment, even while the writer
 *     lives (a second shmclockd that gets -EBUSY does). Mutants
 *     NEXT_EARLY, N2_BEFORE_N1, DEAD_IGNORES_NEXT and (with INTRUDER)
 *     SHARED_ANCHOR must fail.
 *
 * Spin explores interleavings under sequential consistency. The C code gets
 * the same orders from the fences each step names (W1..W6 with W2a,
 * N1, N2, V0..V6, R1..R6, S1..S5, T0..T4); each fence in the C code names the step here. The
 * clock is a shared counter that each reading may advance or not: readings
 * never go backwards and may repeat, as CLOCK_MONOTONIC across CPUs (time
 * that passes while nobody looks is not observable).
 *
 * The fields of a line are stored (and loaded) in two halves, each one
 * step: {mono_base, sim_base} then {mult, jump_epoch, jump_total, st, gen}
 * (jump_total_ns lives in the info line in C, stored and loaded after the
 * record's fields inside the same seq window; where a field sits among the
 * halves does not change what the halves can mix). Loads and stores
 * go in the same order, so what a reader can get from a line being written
 * is old fields then new ones, or new then old: two halves give both mixes,
 * and finer steps would add interleavings but no new outcome.
 * Every commit's record is based at its anchor or later (mono_base >= the
 * anchor it published): a reader that finds the next update open before its
 * anchor is out reads the previous anchor and tells it from a new one only
 * by a > mb (T4). Mutant BASE_BEFORE_ANCHOR breaks that.
 * Time function: timefn(p, m) = sb + (m - mb) * mult for m > mb, else sb.
 */

#ifndef MAXC
#define MAXC 3        /* commits in the whole run */
#endif
#ifndef MAXKILLS
#define MAXKILLS 1    /* writers SIGKILLed */
#endif
#ifndef READS
#define READS 1       /* reads per reader */
#endif
#ifndef NREADERS
#define NREADERS 2    /* reader processes */
#endif
#ifndef MAXMONO
#define MAXMONO 3     /* ticks of the clock */
#endif
#define NGEN (MAXC + 1)
#ifdef AHEAD
#define FREEZE
#endif
#ifdef WITHDRAW
#define FREEZE
#endif

byte mono;                              /* CLOCK_MONOTONIC */
byte seq;                               /* odd while a writer updates */
bit alive = 1;                          /* writer_lock: TID set, OWNER_DIED clear */
byte anc;                               /* anchor_mono_ns */

/* record line and backup line: mono_base, sim_base, mult, jump_epoch,
 * jump_total (jb), and the ghost field gen naming the commit the values
 * came from. */
byte r_mb, r_sb, r_mult = 1, r_ep, r_jb, r_gen;
byte b_mb, b_sb, b_mult = 1, b_ep, b_jb, b_gen;
bit r_st, b_st;                         /* the stale mark (flags 0x10) */
#ifdef AHEAD
/* next line: the function decided for the update in progress, and
 * next_seq: that update's odd seq while it is decided (the C code also
 * stores an undecided mark, seq + 1, which only tells readers they are
 * held: no value depends on it) */
byte n_mb, n_sb, n_mult, n_ep, n_jb, n_gen, nseq, n_anc;
bit n_st;
#define DECIDED (nseq == seq)
#else
#define DECIDED 0
#endif

/* ghost: what commit g stored (commit 0 is the initial state) */
byte hist_mb[NGEN], hist_sb[NGEN], hist_mult[NGEN], hist_ep[NGEN], hist_jb[NGEN];
bit hist_st[NGEN];
byte hist_eff[NGEN];                    /* ghost: commit g's anchor (W2, W2b) */

/* ghost: the largest (epoch, value) and jump-free value any read returned */
byte last_ep, last_v, last_mv;

inline timefn(mb, sb, mult, m, out) {
	if
	:: m > mb -> out = sb + (m - mb) * mult
	:: else -> out = sb
	fi
}

/* Kill the writer here (at most MAXKILLS times in a run). */
#define KILLPOINT if :: kills < MAXKILLS -> goto died :: true -> skip fi

/* A clock reading: the clock may have ticked since the last one, or not. */
inline clock(out) {
	atomic {
		if
		:: mono < MAXMONO -> mono++
		:: true -> skip
		fi;
		out = mono
	}
}

proctype Writer() {
	byte kills, ncommits, mw, cur, spun, withdrawn;
	byte p_mb, p_sb, p_mult = 1, p_ep, p_jb, p_gen;  /* the writer's own copy (w->p) */
	bit p_st;

	goto commits;                    /* the first writer made the segment */

died:
	/* The kernel's robust-futex exit handling sets OWNER_DIED. */
	kills++;
	alive = 0;
#ifndef MUTANT_NO_ANCHOR_WITHDRAW
	/* V0: the next writer withdraws the dead writer's anchor (release
	 * fence; a decision keeps its own, n_anc), and only then */
	anc = b_mb;
#endif
	/* takes the robust mutex: readers see a live writer again. */
	alive = 1;
	/* recover(): V1 acquire load of seq */
	if
#ifdef AHEAD
	:: seq % 2 == 1 && DECIDED ->
		/* V6: the dead writer decided this update: the next line is the
		 * state, and it is completed at its anchor (settle: W4, W5) */
		d_step {
			p_mb = n_mb; p_sb = n_sb; p_mult = n_mult; p_ep = n_ep; p_jb = n_jb;
			p_st = n_st; p_gen = n_gen
		}
		mw = n_anc;
		do
		:: mono >= mw -> break
		:: else -> clock(spun)
		od;
		spun = 0;
		d_step { r_mb = p_mb; r_sb = p_sb }; KILLPOINT;
		d_step { r_mult = p_mult; r_ep = p_ep; r_jb = p_jb; r_st = p_st; r_gen = p_gen }; KILLPOINT;
		d_step { seq++; nseq = seq }; KILLPOINT
#endif
	:: seq % 2 == 1 && !DECIDED ->
		/* V2: the backup is the last committed state; copy it to the record */
		p_mb = b_mb; p_sb = b_sb; p_mult = b_mult; p_ep = b_ep; p_jb = b_jb; p_st = b_st; p_gen = b_gen;
		d_step { r_mb = p_mb; r_sb = p_sb }; KILLPOINT;
		d_step { r_mult = p_mult; r_ep = p_ep; r_jb = p_jb; r_st = p_st; r_gen = p_gen }; KILLPOINT;
		/* V3: release store of the even seq */
		seq++; KILLPOINT
	:: else ->
		/* V4: the record is the last committed state */
		p_mb = r_mb; p_sb = r_sb; p_mult = r_mult; p_ep = r_ep; p_jb = r_jb; p_st = r_st; p_gen = r_gen
	fi;
	/* V5: release fence, then the backup stores */
	d_step { b_mb = p_mb; b_sb = p_sb }; KILLPOINT;
	d_step { b_mult = p_mult; b_ep = p_ep; b_jb = p_jb; b_st = p_st; b_gen = p_gen }; KILLPOINT;

commits:
	do
	:: ncommits < MAXC ->
		ncommits++;
#ifdef STALE
		/* shmclock_writer_set_stale() (the source and the UNIX time of
		 * zero alike): an update that keeps the function. */
		if
		:: true ->
			/* W1: release fence (backup complete), then seq odd */
			seq++; KILLPOINT;
			/* W2: seq_cst fence (the clock reading anchors nothing) */
#ifndef MUTANT_SAME_MOVES_FUNCTION
			/* W2n: SHMCLOCK_ANCHOR_NONE, no cap */
			anc = 255; KILLPOINT;
			p_st = 1 - p_st;
			p_gen = ncommits;
			hist_eff[p_gen] = 0;             /* no instant: the function is the same */
#else
			/* wrong: no cap, and the clock paused at the anchor */
			clock(mw); KILLPOINT;
			anc = 255; KILLPOINT;
			timefn(p_mb, p_sb, p_mult, mw, cur);
			p_mb = mw; p_sb = cur; p_mult = 0;
			p_gen = ncommits;
			hist_eff[p_gen] = mw;
#endif
			d_step {
				hist_mb[p_gen] = p_mb; hist_sb[p_gen] = p_sb;
				hist_mult[p_gen] = p_mult; hist_ep[p_gen] = p_ep; hist_jb[p_gen] = p_jb;
				hist_st[p_gen] = p_st
			}
			/* W4: the record stores */
			d_step { r_mb = p_mb; r_sb = p_sb }; KILLPOINT;
			d_step { r_mult = p_mult; r_ep = p_ep; r_jb = p_jb; r_st = p_st; r_gen = p_gen }; KILLPOINT;
			/* W5: release store of the even seq */
#ifdef AHEAD
			d_step { seq++; nseq = seq }; KILLPOINT;
#else
			seq++; KILLPOINT;
#endif
			/* W6: release fence, then the backup stores */
			d_step { b_mb = p_mb; b_sb = p_sb }; KILLPOINT;
			d_step { b_mult = p_mult; b_ep = p_ep; b_jb = p_jb; b_st = p_st; b_gen = p_gen }; KILLPOINT;
#ifndef MUTANT_SAME_KEEPS_ANCHOR
			/* X2: the anchor withdrawn (the record's mono_base) */
			anc = p_mb; KILLPOINT;
#endif
			goto commits
		:: true -> skip
		fi;
#endif
#ifdef MUTANT_ANCHOR_BEFORE_ODD
		clock(mw);                   /* wrong: the anchor before seq is odd */
#endif
		/* W1: release fence (backup complete), then seq odd */
		seq++; KILLPOINT;
#ifndef MUTANT_ANCHOR_BEFORE_ODD
		/* W2: seq_cst fence, then the clock reading that anchors the change */
		clock(mw); KILLPOINT;
#endif
#ifdef FREEZE
		/* W2b: freeze_at: the anchor may be a later instant than the clock */
		if
		:: mw < MAXMONO -> mw++
		:: true -> skip
		fi;
#endif
		/* W2a: publish the anchor for readers that find the update stuck */
		anc = mw; KILLPOINT;
#ifdef WITHDRAW
		/* shmclock_writer_withdraw(): the update freeze_at opened, nothing
		 * decided, ends on the record as it was, before or after its
		 * instant, without waiting; its slot is not a commit */
		if
		:: withdrawn < 1 ->
			withdrawn++;
			ncommits--;
			/* X1: W4 (stores of the same values: no change), W5 */
#ifdef AHEAD
			d_step { seq++; nseq = seq }; KILLPOINT;
#else
			seq++; KILLPOINT;
#endif
#ifndef MUTANT_WITHDRAW_KEEPS_ANCHOR
			/* X2: the anchor withdrawn (the record's mono_base) */
			anc = p_mb; KILLPOINT;
#endif
			/* W6: the backup already holds the record */
			goto commits
		:: true -> skip
		fi;
#endif
		/* W3: the time every reader agrees on at mw */
		timefn(p_mb, p_sb, p_mult, mw, cur);
		/* The change (forward jumps and scale 1 add no new behaviour;
		 * set_function's hold of a function behind the clock is the
		 * pause or scale shape: anchored at mw, at cur). */
		p_mb = mw;
		p_sb = cur;
		if
#ifdef STALE
		:: p_st = 1 - p_st                   /* stale mark set or cleared */
#endif
		:: p_mult = 0                        /* pause */
		:: p_mult = 2                        /* scale 2 (or resume) */
		:: cur > 0 -> p_sb = cur - 1; p_ep++;  /* jump back */
#ifndef MUTANT_NO_JUMP_TOTAL
			p_jb++                               /* ... counted */
#else
			skip
#endif
		fi;
#ifdef MUTANT_BASE_BEFORE_ANCHOR
		/* wrong: the same line based before the anchor (what set_function
		 * once stored for a function whose instant had passed) */
		if
		:: p_mb > 0 && p_sb >= p_mult -> p_mb = p_mb - 1; p_sb = p_sb - p_mult
		:: true -> skip
		fi;
#endif
		p_gen = ncommits;
#ifdef AHEAD
		hist_eff[p_gen] = mw;
		d_step {
			hist_mb[p_gen] = p_mb; hist_sb[p_gen] = p_sb;
			hist_mult[p_gen] = p_mult; hist_ep[p_gen] = p_ep; hist_jb[p_gen] = p_jb;
			hist_st[p_gen] = p_st
		}
		if
		:: mono < mw ->
			/* set_function(SHMCLOCK_FN_AHEAD), before the instant
			 * (the clock may pass it meanwhile) */
#ifndef MUTANT_N2_BEFORE_N1
			/* N1: the next line (relaxed) */
			d_step { n_mb = p_mb; n_sb = p_sb; n_anc = mw }; KILLPOINT;
			d_step { n_mult = p_mult; n_ep = p_ep; n_jb = p_jb; n_st = p_st; n_gen = p_gen }; KILLPOINT;
			/* N2: release store of next_seq */
			nseq = seq; KILLPOINT
#else
			nseq = seq; KILLPOINT;       /* wrong: decided before the function */
			d_step { n_mb = p_mb; n_sb = p_sb; n_anc = mw }; KILLPOINT;
			d_step { n_mult = p_mult; n_ep = p_ep; n_jb = p_jb; n_st = p_st; n_gen = p_gen }; KILLPOINT
#endif
		:: true -> skip                      /* decided at the instant, or late */
		fi;
#endif
#if defined(FREEZE) && !defined(MUTANT_FREEZE_EARLY_COMMIT)
		/* The change commits at its instant, not before (commit_begin
		 * waits for the anchor of an open update). */
		do
		:: mono >= mw -> break
		:: else -> clock(spun)
		od;
		spun = 0;
#endif
#ifndef AHEAD
		hist_eff[p_gen] = mw;
		d_step {
			hist_mb[p_gen] = p_mb; hist_sb[p_gen] = p_sb;
			hist_mult[p_gen] = p_mult; hist_ep[p_gen] = p_ep; hist_jb[p_gen] = p_jb;
			hist_st[p_gen] = p_st
		}
#endif
		/* W4: the record stores (relaxed), jump_total last */
		d_step { r_mb = p_mb; r_sb = p_sb }; KILLPOINT;
		d_step { r_mult = p_mult; r_ep = p_ep; r_jb = p_jb; r_st = p_st; r_gen = p_gen }; KILLPOINT;
		/* W5: release store of the even seq (and the decision withdrawn) */
#ifdef AHEAD
		d_step { seq++; nseq = seq }; KILLPOINT;
#else
		seq++; KILLPOINT;
#endif
		/* W6: release fence, then the backup stores */
		d_step { b_mb = p_mb; b_sb = p_sb }; KILLPOINT;
		d_step { b_mult = p_mult; b_ep = p_ep; b_jb = p_jb; b_st = p_st; b_gen = p_gen }; KILLPOINT
	:: else -> break
	od
}

proctype Reader() {
	byte n, s1, s2, m, mb, sb, mult, ep, jb, gen, v, seen_ep, seen_v, seen_mv, a, pv, ns, na;
	bit st;

	do
	:: n < READS ->
		n++;
		/* ghost: what had been returned when this read started */
		d_step { seen_ep = last_ep; seen_v = last_v; seen_mv = last_mv }
retry:
		/* R1: acquire load of seq, and R2: the clock reading. One step: a
		 * writer step between the two either changes seq (the reader then
		 * retries at R5) or stores the backup (which this path ignores). */
		atomic {
			s1 = seq;
			if
			:: s1 % 2 == 1 -> goto slow
			:: else -> clock(m)
			fi
		}
		/* R3: the record loads (relaxed), and the jump total */
		d_step { mb = r_mb; sb = r_sb };
#if defined(MUTANT_JUMP_TOTAL_AFTER_RECHECK)
		d_step { mult = r_mult; ep = r_ep; st = r_st; gen = r_gen };
#elif defined(MUTANT_STALE_AFTER_RECHECK)
		d_step { mult = r_mult; ep = r_ep; jb = r_jb; gen = r_gen };
#else
		d_step { mult = r_mult; ep = r_ep; jb = r_jb; st = r_st; gen = r_gen };
#endif
		/* R4: the lock word (only tells the caller the writer is gone) */
		/* R5: acquire fence, then re-read seq */
		s2 = seq;
#ifndef MUTANT_NO_RECHECK
		if
		:: s2 != s1 -> goto retry
		:: else -> skip
		fi;
#endif
#ifdef MUTANT_JUMP_TOTAL_AFTER_RECHECK
		jb = r_jb;                           /* wrong: outside the window */
#endif
#ifdef MUTANT_STALE_AFTER_RECHECK
		st = r_st;                           /* wrong: the flags outside the window */
#endif
		goto done;
slow:
		/* S1: the lock word (relaxed) */
		if
		:: alive == 0 ->
#ifdef AHEAD
			/* S5: next_seq (acquire), and the decision's instant */
			ns = nseq;
			if
			:: ns == s1 -> na = n_anc
			:: else -> na = 255
			fi;
#endif
#ifndef MUTANT_CLOCK_AFTER_RECHECK
			/* S3: the clock reading, inside the window S4 closes */
			clock(m);
#endif
			/* S2: the backup loads (relaxed), or the decided function's */
			if
#if defined(AHEAD) && !defined(MUTANT_DEAD_IGNORES_NEXT)
			:: ns == s1 && m >= na ->
				d_step { mb = n_mb; sb = n_sb };
				d_step { mult = n_mult; ep = n_ep; jb = n_jb; st = n_st; gen = n_gen }
#endif
			:: else ->
				d_step { mb = b_mb; sb = b_sb };
				d_step { mult = b_mult; ep = b_ep; jb = b_jb; st = b_st; gen = b_gen }
			fi;
			/* S4: acquire fence, then: is seq still the odd value we saw? */
#ifndef MUTANT_NO_BACKUP_RECHECK
			if
			:: seq != s1 -> goto retry
			:: else -> skip
			fi;
#endif
#ifdef MUTANT_CLOCK_AFTER_RECHECK
			clock(m);                    /* wrong: the bug this model found */
#endif
			goto done
		:: else ->
			/* a live writer mid-update. T0: acquire fence (pairs with
			 * V0); T1: next_seq (acquire) and the published anchor */
#ifdef AHEAD
			ns = nseq;
#endif
			a = anc;
#ifdef AHEAD
			/* decided: the instant from the next line */
			if
#ifndef MUTANT_SHARED_ANCHOR
			:: ns == s1 -> na = n_anc
#else
			:: ns == s1 -> na = a            /* wrong: V0 may have withdrawn it */
#endif
			:: else -> na = 255
			fi;
#endif
			/* T2: the clock reading */
			clock(m);
			/* the backup loads (relaxed), or, decided and at its
			 * instant, the next line's */
			if
#ifdef AHEAD
#ifndef MUTANT_NEXT_EARLY
			:: ns == s1 && m >= na ->
#else
			:: ns == s1 ->                   /* wrong: before the instant too */
#endif
				d_step { mb = n_mb; sb = n_sb };
				d_step { mult = n_mult; ep = n_ep; jb = n_jb; st = n_st; gen = n_gen }
#endif
			:: else ->
				d_step { mb = b_mb; sb = b_sb };
				d_step { mult = b_mult; ep = b_ep; jb = b_jb; st = b_st; gen = b_gen }
			fi;
			/* T3: acquire fence, then: is seq still the odd value we saw? */
			if
			:: seq != s1 -> goto retry
			:: else -> skip
			fi;
			/* T4: decided, the next function from its instant on and
			 * the last committed one before it; this update's anchor:
			 * the last committed time, frozen at the anchor; else wait
			 * (spin) until seq moves */
			if
			:: ns == s1 -> goto done
			:: ns != s1 && a > mb ->
#ifndef MUTANT_NO_ANCHOR_CAP
				if
				:: m > a -> m = a
				:: else -> skip
				fi;
#endif
				goto done
			:: else -> goto slow
			fi
		fi;
done:
		/* R6: evaluate, and check */
		timefn(mb, sb, mult, m, v);
		/* not ahead of its instant: before a commit's anchor, no more
		 * than the function before it */
		if
		:: gen > 0 && m < hist_eff[gen] ->
			timefn(hist_mb[gen - 1], hist_sb[gen - 1], hist_mult[gen - 1], m, pv);
			assert(v <= pv)
		:: else -> skip
		fi;
		d_step {
			assert(mb == hist_mb[gen] && sb == hist_sb[gen] &&
			       mult == hist_mult[gen] && ep == hist_ep[gen] &&
			       jb == hist_jb[gen] && st == hist_st[gen]);       /* not torn */
			assert(ep > seen_ep || (ep == seen_ep && v >= seen_v)); /* not backwards */
			assert(v + jb >= seen_mv);            /* jump-free time not backwards */
			if
			:: ep > last_ep || (ep == last_ep && v > last_v) -> last_ep = ep; last_v = v
			:: else -> skip
			fi;
			if
			:: v + jb > last_mv -> last_mv = v + jb
			:: else -> skip
			fi;
			/* forget this read: fewer distinct states */
			s1 = 0; s2 = 0; m = 0; mb = 0; sb = 0; mult = 0; ep = 0; jb = 0; st = 0; gen = 0; v = 0; a = 0; pv = 0;
			ns = 0; na = 0;
			seen_ep = 0; seen_v = 0; seen_mv = 0
		}
	:: else -> break
	od
}

#ifdef INTRUDER
/* A writer opening the segment (attach_segment, V0) while the writer may
 * be alive: it withdraws anchor_mono_ns before take_mutex says -EBUSY. */
proctype Intruder() {
	anc = b_mb
}
#endif

#ifndef LOCKSTEP
init {
	/* commit 0: the state the segment starts from (mb 0, sb 0, mult 1) */
	hist_mult[0] = 1;
	atomic {
		byte i;
		run Writer();
#ifdef INTRUDER
		run Intruder();
#endif
		for (i : 1 .. NREADERS) {
			run Reader()
		}
	}
}
#endif

#ifdef LOCKSTEP
/*
 * Lockstep (lockstep_participant.c, lockstep_host.c): participants grant, the host (the clock's writer)
 * scans their slots and commits the smallest grant. The commit itself is
 * the seqlock above, proven on its own: here it is one store to `clk`, and
 * a participant's advance() is a wait for clk >= its grant. Steps as named
 * in lockstep_participant.c and lockstep_host.c: G1 (grant: store, then kick), H2 (scan: lock word, state,
 * grant), the host's wait (publish block_at, host_waiting, re-check the
 * token, FUTEX_WAIT), L1 (leave). Participants start as
 * members at grant 0 (the join handshake, J1/J2/H1, is one CAS each way
 * and adds no race the scan does not already have).
 *
 * Checked, with a participant SIGKILLed at any step:
 *   - the clock never passes the last grant of a participant whose death
 *     the host has not yet seen (with LS_ABORT: of any dead participant,
 *     ever: the host stops at the death);
 *   - a death the host reports is real (a clean leave is never taken for
 *     one);
 *   - nothing hangs: no lost wake-up leaves the host asleep while the
 *     participants wait for it (spin's invalid end states). The host's
 *     periodic scan (a timeout) is modelled only while a death is unseen,
 *     which is the only thing it is there for.
 */
#ifndef NP
#define NP 2          /* participants */
#endif
#ifndef TEND
#define TEND 2        /* each grants 1 .. TEND */
#endif
#ifndef LSKILLS
#define LSKILLS 1     /* participants killed */
#endif
#define S_FREE 0
#define S_MEMBER 2
#define S_LEFT 3
#define JOIN_OR_LEAVE 255

byte lk[NP];          /* a slot's lock word: 1 owner alive, 2 owner died, 0 unlocked */
byte st[NP];          /* slot state */
byte gr[NP];          /* grant_ns */
byte clk;             /* the clock */
byte gfutex;          /* grant_futex */
bit hwait;            /* host_waiting */
byte block_at;        /* block_at_ns */
bit sleeping;         /* the host is inside FUTEX_WAIT */
bit aborted;          /* LS_ABORT: the host stopped at a death */
/* ghost */
byte lskills, noticed, nfin;
bit killed[NP];
byte lastgr[NP];

/* kick_host(): the increment, then a FUTEX_WAKE only when the host waits
 * and this is a join or leave, or no member's grant is still at or below
 * where the host is blocked (this grant may have been the last one it
 * waits for). */
inline kick(old, j, ba, any) {
	gfutex++;
	if
	:: hwait ->
		if
		:: old == JOIN_OR_LEAVE -> sleeping = 0
		:: else ->
			ba = block_at;
			any = 0;
			j = 0;
			do
			:: j < NP ->
				if
				:: st[j] == S_MEMBER && gr[j] <= ba -> any = 1
				:: else -> skip
				fi;
				j++
			:: else -> break
			od;
			if
			:: !any -> sleeping = 0
			:: else -> skip
			fi
		fi
	:: else -> skip
	fi
}

/* The kernel's robust-futex exit handling marks the lock: the participant
 * is gone, whatever it was doing. */
#define LSKILL if :: lskills < LSKILLS -> goto died :: true -> skip fi

proctype Participant(byte i) {
	byte t = 1, old, j, ba;
	bit any;

	do
	:: t <= TEND ->
		LSKILL;
		old = gr[i];
#ifndef MUTANT_LS_KICK_BEFORE_GRANT
		d_step { gr[i] = t; lastgr[i] = t };        /* G1: release store */
		LSKILL;
		kick(old, j, ba, any);
#else
		kick(old, j, ba, any);
		LSKILL;
		d_step { gr[i] = t; lastgr[i] = t };
#endif
		LSKILL;
		(clk >= t || aborted);                        /* advance() returns */
		t++
	:: else -> break
	od;
	LSKILL;
	st[i] = S_LEFT;                                       /* L1 */
	LSKILL;
	kick(JOIN_OR_LEAVE, j, ba, any);
	LSKILL;
	d_step { lk[i] = 0; nfin++ };                         /* unlock */
	goto done;
died:	/* exit runs, then the kernel marks the lock */
	skip;
	d_step { lk[i] = 2; killed[i] = 1; lskills++; nfin++ };
done:
	skip
}

proctype Host() {
	byte i, tok, mn, n, s;
	bit live;

	do
	:: true ->
		tok = gfutex;                                 /* the token, before the scan */
		mn = 255; n = 0; i = 0;
		do                                            /* H2 */
		:: i < NP ->
#ifndef MUTANT_LS_STATE_BEFORE_LOCK
			live = (lk[i] == 1);
			s = st[i];
#else
			s = st[i];
			live = (lk[i] == 1);
#endif
			if
			:: s == S_MEMBER && !live ->
				assert(killed[i]);            /* a reported death is real */
				d_step { st[i] = S_FREE; noticed++ };
#ifdef LS_ABORT
				aborted = 1
#endif
			:: s == S_MEMBER && live ->
				if
				:: gr[i] < mn -> mn = gr[i]
				:: else -> skip
				fi;
				n++
			:: s == S_LEFT -> st[i] = S_FREE
			:: else -> skip
			fi;
			i++
		:: else -> break
		od;
#ifndef MUTANT_LS_ABORT_COMMITS
		if
		:: aborted -> break
		:: else -> skip
		fi;
#endif
		if
		:: n > 0 && mn > clk ->
			d_step {
				i = 0;
				do
				:: i < NP ->
#ifdef LS_ABORT
					assert(!killed[i] || mn <= lastgr[i]);
#else
					assert(!killed[i] || st[i] == S_FREE || mn <= lastgr[i]);
#endif
					i++
				:: else -> break
				od;
				i = 0;
				clk = mn                                  /* commit */
			}
		:: n == 0 && nfin == NP && gfutex == tok -> break
		:: else ->
			/* shmclock_lockstep_host_wait(): blocked at the clock's
			 * time (not at a grant loaded anew: one that moved since
			 * the scan would hide the last grant it waits for) */
#ifndef MUTANT_LS_BLOCK_AT_FRESH
			block_at = clk;
#else
			block_at = 255; i = 0;
			do
			:: i < NP ->
				if
				:: st[i] == S_MEMBER && gr[i] < block_at -> block_at = gr[i]
				:: else -> skip
				fi;
				i++
			:: else -> break
			od;
#endif
			hwait = 1;
#ifndef MUTANT_LS_NO_TOKEN_RECHECK
			atomic {
				if
				:: gfutex != tok -> skip              /* FUTEX_WAIT returns at once */
				:: else -> sleeping = 1
				fi
			};
#else
			sleeping = 1;
#endif
			/* woken; or the periodic scan while a death is unseen;
			 * or everyone is done (the daemon idles on for joins
			 * and commands, which the model does not have) */
			atomic { !sleeping || lskills > noticed || nfin == NP -> sleeping = 0 };
			hwait = 0
		fi
	od
}

init {
	atomic {
		byte i;
		for (i : 0 .. NP - 1) {
			lk[i] = 1;
			st[i] = S_MEMBER
		}
		run Host();
		for (i : 0 .. NP - 1) {
			run Participant(i)
		}
	}
}
#endif
