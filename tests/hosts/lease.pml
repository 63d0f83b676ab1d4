/* SPDX-License-Identifier: MIT */
/*
 * A follower joining its leader, and its lease, for spin
 * (shmclockd/mode_distribute.c: follower_fresh, follower_echo, admit_check,
 * lease_keep; the leader's leader_ack and member_live). twophase.pml checks
 * the commit among members; this model checks how a follower becomes one
 * and stops being one, over links that lose any message:
 *
 * - The leader publishes its function in force (heartbeats), and decides
 *   its change on its own clock at any moment: it
 *   announces it for E = now + L, and decides it before E once every member
 *   acknowledged it (at once without one). A follower is a member from the
 *   arrival of a lease of its own until LEASE after the last one arrived
 *   (member_live(): not only after an announcement it did not acknowledge),
 *   and the leader echoes each lease it takes, with whether it announced
 *   the change by then.
 * - The follower starts stale, not a member (a first join, or a rejoin
 *   after silence: the leader may have decided without it), and sends a
 *   lease whenever it likes, at most once a tick. It holds an announced
 *   instant, acknowledges it, and takes the commit. It is fresh once an
 *   echo came and, if that echo says announced, it heard the change (the
 *   announcement or the commit). Its readers run on no further than LEASE
 *   after the sending of the last lease echoed (its clock thread opens the
 *   update there: they stop there by themselves), and it marks itself stale
 *   there.
 *
 * The hosts' clocks agree (the code subtracts the offset's bound from the
 * lease: DIST_LEASE_MARGIN_NS). The property (at every reading): a reading
 * of the follower that is not stale lies on the leader's function, as in
 * twophase.pml.
 *
 * Mutants (each must fail; tests/lib/spin_check.sh): AT_ONCE, a follower
 * fresh as soon as it hears a function (before the echo: what shmclockd
 * did before the echo, gap 3 in doc/hosts.md); NO_CATCH_UP, fresh on an
 * echo without the change it names; FROM_SENDING, a lease counted from the
 * last lease sent, not echoed (a one-way break: its leases lost, the
 * leader's messages not).
 */

#define L 2            /* Lead: from an announcement to its instant */
#define LEASE 3        /* a member's lease */
#define TMAX 8
#define NONE 255

mtype = { HB, ANN, COMMIT, ECHO, LEASE_MSG, ACK };

byte t;                        /* the hosts' time */
/* leader */
bool announced, decided, member, acked;
byte E = NONE, Ec = NONE, seen;
byte sent = NONE;              /* when the leader last sent (once a tick) */
/* follower */
bool stale = true, heard, fcommitted, echoed, echo_ann;
byte hE = NONE;                /* the instant it holds or took */
byte until;                    /* its readers run on up to here (0: none yet) */
byte lsent = NONE;             /* when it last sent a lease (once a tick) */

chan toF = [2] of { mtype, byte, bool };  /* HB, ANN(E), COMMIT(E), ECHO(stamp, announced) */
chan toL = [1] of { mtype, byte };        /* LEASE_MSG(stamp), ACK */

/* What the follower's readers show now, unless stale: the new function
 * once committed and past the instant; held at the instant (the value
 * there is the leader's before its switch); else the old one, running. */
inline reading()
{
	if
	:: stale -> skip
	:: else ->
		if
		:: heard && fcommitted && t >= hE ->
			assert(Ec != NONE && t >= Ec && Ec == hE)
		:: heard && !fcommitted && t >= hE ->
			assert(Ec == NONE || hE <= Ec)
		:: else ->
			assert(Ec == NONE || t < Ec)
		fi
	fi
}

/* Each tick: what the follower's readers show, the end of its lease (its
 * readers stop there by themselves: stale from there), the leader's member
 * gone LEASE after its last lease arrived; then time moves on. */
active proctype Clock()
{
end:
	do
	:: t < TMAX ->
		atomic {
		reading();
		if
		:: !stale && t + 1 >= until -> stale = true
		:: else -> skip
		fi;
		if
		:: member && t + 1 >= seen + LEASE -> member = false
		:: else -> skip
		fi;
		t++
		}
	od
}

proctype Leader()
{
	mtype m;
	byte s;

end:
	do
	:: !announced ->               /* a client's change, at any moment */
		atomic { announced = true; E = t + L }
	:: announced && !decided && (!member || acked) && t < E ->
		atomic { decided = true; Ec = E; reading() }
	:: sent != t ->   /* the function in force (a heartbeat), the announcement or
			   * the commit, once a tick */
		atomic {
		sent = t;
		if
		:: nfull(toF) && !announced -> toF!HB, 0, false
		:: nfull(toF) && announced && !decided -> toF!ANN, E, false
		:: nfull(toF) && decided -> toF!COMMIT, E, false
		:: skip
		fi
		}
	:: atomic {
		toL?m, s ->
		if
		:: m == LEASE_MSG ->
			member = true;
			seen = t;
			if
			:: nfull(toF) -> toF!ECHO, s, announced
			:: skip
			fi
		:: m == ACK && member -> acked = true
		:: else -> skip
		fi;
		m = 0;
		s = 0
	   }
	od
}

proctype Follower()
{
	mtype m;
	byte p;
	bool a;

end:
	do
	:: atomic {
		lsent != t && nfull(toL) ->   /* a lease, stamped (lost or not) */
		lsent = t;
		toL!LEASE_MSG, t;
#ifdef MUTANT_FROM_SENDING
		until = (t + LEASE > until -> t + LEASE : until)
#endif
	   }
	:: atomic {
		toF?m, p, a ->
		if
		:: m == ANN ->
			heard = true;
			hE = p;
			if
			:: nfull(toL) -> toL!ACK, 0
			:: skip
			fi
		:: m == COMMIT ->
			heard = true;
			hE = p;
			fcommitted = true
		:: m == ECHO ->
			echoed = true;
			echo_ann = echo_ann || a;
			until = (p + LEASE > until -> p + LEASE : until)
		:: else -> skip   /* a heartbeat: the function it knows */
		fi;
#ifdef MUTANT_AT_ONCE
		if
		:: stale && until == 0 -> until = t + LEASE; stale = false
		:: else -> skip
		fi;
#endif
		/* admit_check: echoed, and caught up with what the echo names */
		if
#ifdef MUTANT_NO_CATCH_UP
		:: stale && echoed && t < until -> stale = false
#else
		:: stale && echoed && (!echo_ann || heard) && t < until -> stale = false
#endif
		:: else -> skip
		fi;
		reading();
		m = 0;
		p = 0;
		a = false
	   }
	od
}

init {
	atomic {
		run Leader();
		run Follower()
	}
}
