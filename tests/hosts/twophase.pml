/* SPDX-License-Identifier: MIT */
/*
 * The two-phase commit between hosts (shmclockd/mode_distribute.c, issue
 * 29), for spin: a leader changes its time function at an instant agreed
 * with its followers over links that lose any message, with followers that
 * may die at any step.
 *
 * Time is a counter every process reads (the hosts' synchronised clocks);
 * the clock process moves it on at any moment, so any process may be late
 * by any amount. One change (the leader agrees one at a time: the next is
 * announced once this one took effect): the leader announces it for the
 * instant E = now + L, re-announces it under a higher plan at a later
 * instant when not every member acknowledged it G before E, or when it
 * could not decide before E (postpone), declares a member lost once LOST
 * passed since the first announcement without its acknowledgement (LOST is
 * at least a follower's silence bound S plus a margin: the member's
 * lease), and decides once every remaining member acknowledged the current
 * plan, before E; it then says COMMIT(plan), repeatedly. Its own function
 * switches at E (decided ahead: its readers switch there by themselves).
 *
 * A follower holds the latest plan it heard, acknowledges it, and accepts a
 * COMMIT only of that plan. Its readers show the old function until the
 * held instant, then the value there (frozen: the update opened when the
 * announcement is heard, shmclock_writer_freeze_at, in the same pass of
 * the clock thread that takes it; no later wake-up of that thread stands
 * between its readers and the instant), then the new function once
 * committed. It marks itself stale holding an
 * instant for H without a commit, or hearing nothing for S, and then says
 * it leaves (LEAVE, lost or not): the leader stops waiting for it. A stale
 * follower's readings make no claim.
 *
 * The property (asserted at every reading, and at the decision for
 * readings before it): every reading of a follower that is not stale lies
 * on the leader's function: old(x) only for x before the switch, new(t)
 * only at or after it, anchored at the same instant as the leader's (a
 * function switched at another instant is another function: a pause there
 * holds another value). Behind (a value the leader showed earlier) is
 * allowed; another function never.
 *
 * Mutants (each must fail; tests/lib/spin_check.sh): MUTANT_LOOSE_COMMIT, a
 * follower that takes a COMMIT of another plan; NO_HOLD, readers that run
 * on past an uncommitted instant; LOST_EARLY, a leader that declares a
 * member lost before it would be stale; DECIDE_ANY, a leader that decides
 * on one acknowledgement; DECIDE_LATE, a leader that decides after the
 * instant and switches when it decides (what a late clock thread did:
 * followers switched at the instant, the leader later); EXPIRE_SILENT, a
 * leader that stops waiting for a member it has not heard from for its
 * lease before it announces a change, not LOST after the announcement (a
 * member that still hears the leader is fresh then, and misses the
 * announcement: spin finds it at once with -DS=3, in 46 s with S = 2);
 * LEAVE_FRESH, a follower that says it leaves before it is marked stale.
 * mode_distribute.c's member_live() does drop such a member: safe only
 * because its follower counts its lease from the last lease the leader
 * echoed, and is stale at its end (lease.pml checks that; a follower of a
 * leader that does not echo, an older shmclockd, is not covered). In this
 * model, a leader drops a member only LOST after the announcement it did
 * not acknowledge.
 */

#define NF 2           /* followers (the macros below are written for two) */
#define HOLDS(k) (!member[k] || acked[k])
#ifdef MUTANT_DECIDE_ANY
#define READY ((member[0] && acked[0]) || (member[1] && acked[1]))
#else
#define READY (HOLDS(0) && HOLDS(1))
#endif
#define L 2            /* Lead: from an announcement to its instant */
#define G 1            /* the leader decides or postpones G before the instant */
#ifndef S
#define S 2            /* a follower that hears nothing for S is stale */
#endif
#ifdef MUTANT_LOST_EARLY
#define LOST 1
#else
#define LOST (S + 1)   /* a member's lease: its silence bound and a margin */
#endif
#define H 3            /* a follower holding an instant for H is stale */
#define PMAX 2         /* re-plans explored */
#define TMAX 6
#define NONE 255
#define LEAVE 254      /* ACK(follower, LEAVE): it left (stale) */

mtype = { ANN, COMMIT };

byte t;                        /* the hosts' time */
/* leader */
byte plan, E, first;
bool decided;
byte Ec = NONE;                /* where its function switches (once decided) */
bool member[NF], acked[NF];    /* acked: under the current plan */
/* followers */
byte hp[NF], hE[NF];           /* the plan held and its instant; NONE: none */
bool fcommitted[NF], stale[NF], dead[NF];
byte silent[NF];               /* ticks since it last heard the leader (up to S) */

chan toF[NF] = [1] of { mtype, byte, byte };  /* ANN(plan, E) / COMMIT(plan) */
chan toL = [1] of { byte, byte };             /* ACK(follower, plan) */
byte sent = NONE;              /* when the leader last sent (once a tick) */

/* What follower i's readers show now (unless stale or dead): the new
 * function once committed and past the instant; held at the instant (the
 * value there is the leader's just before its switch, a jump's too); else
 * the old function, running. Each must lie on the leader's function. */
inline reading(i)
{
	if
	:: stale[i] || dead[i] -> skip
	:: else ->
		if
		:: hp[i] != NONE && fcommitted[i] && t >= hE[i] ->
			assert(Ec != NONE && t >= Ec && Ec == hE[i])
		:: hp[i] != NONE && !fcommitted[i] && t >= hE[i] ->
#ifdef MUTANT_NO_HOLD
			assert(Ec == NONE || t < Ec)
#else
			assert(Ec == NONE || hE[i] <= Ec)
#endif
		:: else ->
			assert(Ec == NONE || t < Ec)
		fi
	fi
}

/* Follower k marks its clock stale, and then (never before: the mark is
 * in its segment first) says it leaves, lost or not: its leader stops
 * waiting for it (follower_leave, leave_send). */
inline go_stale(k)
{
	stale[k] = true;
	if
	:: nfull(toL) -> toL!k, LEAVE
	:: skip
	fi
}

/* Each tick: what every follower's readers show at its end, then the
 * followers' timers (a hold or a silence that lasted marks the clock
 * stale, assumed timely), then time moves on. */
active proctype Clock()
{
	byte k;

end:
	do
	:: t < TMAX ->
		atomic {
		k = 0;
		do
		:: k < NF ->
			reading(k);
			if
			:: !dead[k] && !stale[k] && hp[k] != NONE && !fcommitted[k] &&
			   t + 1 >= hE[k] + H ->
				go_stale(k)
			:: else -> skip
			fi;
			if
			:: silent[k] < S -> silent[k]++
			:: else -> skip
			fi;
			if
			:: !dead[k] && !stale[k] && silent[k] >= S -> go_stale(k)
			:: else -> skip
			fi;
			k++
		:: k == NF -> break
		od;
		k = 0;
		t++
		}
	od
}

proctype Leader()
{
	byte f, p;

	first = t;
	E = t + L;
	plan = 0;
#ifdef MUTANT_EXPIRE_SILENT
	/* A member the leader has not heard from for its lease is dropped
	 * before the change is announced (its lease messages lost, or only
	 * its way to the leader broken), while it still hears the leader
	 * and is fresh. */
	if
	:: member[0] = false
	:: skip
	fi;
#endif
end:
	do
	:: !decided && sent != t ->   /* announce (again), once a tick; lost or not */
		atomic {
		sent = t;
		if
		:: nfull(toF[0]) -> toF[0]!ANN, plan, E
		:: skip
		fi;
		if
		:: nfull(toF[1]) -> toF[1]!ANN, plan, E
		:: skip
		fi
		}
	:: decided && sent != t ->    /* repeat the commit, once a tick */
		atomic {
		sent = t;
		if
		:: nfull(toF[0]) -> toF[0]!COMMIT, plan, 0
		:: skip
		fi;
		if
		:: nfull(toF[1]) -> toF[1]!COMMIT, plan, 0
		:: skip
		fi
		}
	:: atomic {
		toL?f, p ->
		if
		:: p == LEAVE -> member[f] = false   /* it left: not waited for */
		:: p == plan -> acked[f] = true
		:: else -> skip
		fi;
		f = 0;
		p = 0
	   }
#ifdef MUTANT_DECIDE_LATE
	:: !decided && READY ->   /* every member holds the current plan */
		atomic {
		decided = true;
		Ec = (t > E -> t : E);
		reading(0);   /* what followers show at this moment */
		reading(1)
		}
	:: !decided && !READY && t + G >= E ->   /* postpone */
#else
	:: !decided && READY && t < E ->   /* every member holds the current plan */
		atomic {
		decided = true;
		Ec = E;       /* decided ahead: its readers switch there */
		reading(0);   /* what followers show at this moment */
		reading(1)
		}
	:: !decided && (!READY || t >= E) && t + G >= E ->   /* postpone */
#endif
		atomic {
		/* the members silent for their lease are lost */
		if
		:: member[0] && !acked[0] && t >= first + LOST -> member[0] = false
		:: else -> skip
		fi;
		if
		:: member[1] && !acked[1] && t >= first + LOST -> member[1] = false
		:: else -> skip
		fi;
		if
		:: (!READY || t >= E) && plan < PMAX ->   /* the rest again, later */
			plan++;
			E = t + L;
			acked[0] = false;
			acked[1] = false
		:: else -> skip   /* decided next, or (beyond what is explored) waits */
		fi
		}
	od
}

proctype Follower(byte i)
{
	mtype m;
	byte p, e;

end:
	do
	:: atomic {
		toF[i]?m, p, e ->
		silent[i] = 0;
		if
		:: m == ANN ->
			if
			:: hp[i] == NONE || p > hp[i] ->
				hp[i] = p;
				hE[i] = e;
				fcommitted[i] = false
			:: else -> skip
			fi;
			if   /* acknowledge what it holds: lost or not */
			:: hp[i] == p && nfull(toL) -> toL!i, p
			:: skip
			fi
		:: m == COMMIT ->
#ifdef MUTANT_LOOSE_COMMIT
			if
			:: hp[i] != NONE -> fcommitted[i] = true
			:: else -> skip
			fi
#else
			if
			:: p == hp[i] -> fcommitted[i] = true
			:: else -> skip
			fi
#endif
		fi;
		reading(i);
		m = 0;
		p = 0;
		e = 0
		}
	:: atomic { dead[i] = true; break }   /* dies: silent from now on */
#ifdef MUTANT_LEAVE_FRESH
	/* says it leaves before its stale mark is in its segment (or without
	 * one): fresh meanwhile, and its leader goes on without it */
	:: atomic { !dead[i] && !stale[i] && nfull(toL) -> toL!i, LEAVE }
#endif
	od
}

init {
	byte k;

	atomic {
		k = 0;
		do
		:: k < NF ->
			member[k] = true;
			hp[k] = NONE;
			run Follower(k);
			k++
		:: k == NF -> break
		od;
		run Leader()
	}
}
